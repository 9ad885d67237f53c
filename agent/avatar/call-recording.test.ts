/**
 * A call's recording starts its encoder while the avatar joins and records through it once the
 * user arrives; an encoder started for a user who never came is stopped, leaving no file and no
 * ffmpeg behind.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { Logger } from '../../core/platform/log.ts';
import type { ObjectStorage } from '../../core/platform/storage/index.ts';
import { i420Size } from '../../render/encode/index.ts';
import type { CallRecordingSink } from './call.ts';
import { CallRecording } from './call-recording.ts';

const W = 64;
const H = 64;
const FPS = 25;
const RATE = 24_000;
const root = mkdtempSync(path.join(tmpdir(), 'call-recording-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function ffmpegChildren(): number {
  let out = '';
  try {
    out = execFileSync('ps', ['-o', 'comm=', '--ppid', String(process.pid)], { encoding: 'utf8' });
  } catch {
    // ps exits 1 when there are none.
  }
  return out.split('\n').filter((c) => c.includes('ffmpeg')).length;
}

function parts(workDir: string) {
  const stored = new Map<string, number>();
  const ready: { recordingId: string; durationSeconds: number }[] = [];
  const sink: CallRecordingSink = {
    begin: async () => ({ recordingId: 'rec_1', storageKey: 'recordings/rec_1.mp4' }),
    ready: async (recordingId, info) => void ready.push({ recordingId, durationSeconds: info.durationSeconds }),
    failed: async () => {},
  };
  const storage = {
    put: async (key: string, body: Readable) => {
      let bytes = 0;
      for await (const chunk of body) bytes += (chunk as Buffer).length;
      stored.set(key, bytes);
    },
  } as unknown as ObjectStorage;
  let position = 0;
  const recording = new CallRecording({
    sink,
    storage,
    workDir,
    fps: FPS,
    sampleRate: RATE,
    position: () => position,
    log: pino({ level: 'silent' }) as unknown as Logger,
  });
  return { recording, stored, ready, advance: (samples: number) => (position += samples) };
}

describe('call recording', () => {
  it('records through the encoder started while the avatar joined', async () => {
    const workDir = path.join(root, 'recorded');
    const { recording, stored, ready, advance } = parts(workDir);
    recording.prepare(W, H);
    await recording.start(W, H, 0);
    const frame = new Uint8Array(i420Size(W, H)).fill(90);
    const spf = RATE / FPS;
    for (let n = 0; n < 25; n++) {
      recording.avatarAudio(n * spf, new Int16Array(spf).fill(1000));
      advance(spf);
      recording.video(n, frame);
    }
    await recording.finish(25 * spf);
    expect(ready).toEqual([{ recordingId: 'rec_1', durationSeconds: expect.closeTo(1, 1) as number }]);
    expect(stored.get('recordings/rec_1.mp4')).toBeGreaterThan(1000);
    expect(readdirSync(workDir), 'the local file removed once stored').toEqual([]);
  }, 30_000);

  it('stops the encoder started for a user who never came, leaving no file', async () => {
    const workDir = path.join(root, 'never');
    const before = ffmpegChildren();
    const { recording, stored, ready } = parts(workDir);
    recording.prepare(W, H);
    await new Promise((r) => setTimeout(r, 300));
    expect(ffmpegChildren(), 'the encoder started ahead').toBe(before + 1);
    await recording.finish(0);
    expect(ffmpegChildren()).toBe(before);
    expect(readdirSync(workDir)).toEqual([]);
    expect(stored.size + ready.length, 'nothing recorded').toBe(0);
  }, 30_000);
});
