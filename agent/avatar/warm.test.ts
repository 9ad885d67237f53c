/**
 * A worker warms its call path as it starts: every step runs on the real engines (rtc-node's FFI,
 * the lip-sync engine, the viseme model, the frame decoder), and a step that fails is logged and
 * left to the first call, without stopping the others or the worker.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Logger } from '../../core/platform/log.ts';
import { inProcessFrameDecoder } from '../../render/framecache/index.ts';
import { createLipSync, type LipSyncEngine } from '../../render/lipsync/index.ts';
import { createAudioVisemeThread, type AudioVisemeThread } from '../../render/visemes/index.ts';
import { quietRtcLogs } from '../rtc-logs.ts';
import { warmCallPath } from './warm.ts';

interface Line {
  level: number;
  msg: string;
  step?: string;
  ms?: Record<string, number>;
}

function capture(): { log: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Line);
      done();
    },
  });
  return { log: pino({ level: 'debug' }, stream) as unknown as Logger, lines };
}

let lipsync: LipSyncEngine;
let mouthAnalysis: AudioVisemeThread;

beforeAll(async () => {
  quietRtcLogs('warn');
  [lipsync, mouthAnalysis] = await Promise.all([createLipSync('builtin'), createAudioVisemeThread()]);
}, 60_000);

afterAll(async () => {
  await Promise.all([lipsync?.release(), mouthAnalysis?.release()]);
});

describe('warming the call path', () => {
  it('runs every step on the real engines, none failing', async () => {
    const { log, lines } = capture();
    await warmCallPath({ lipsync, mouthAnalysis, frameDecoder: inProcessFrameDecoder }, log);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    const done = lines.find((l) => l.msg === 'call path warmed');
    expect(Object.keys(done?.ms ?? {})).toEqual([
      'ffiTypes',
      'sources',
      'webStreams',
      'frames',
      'ffmpeg',
      'lipsync',
      'mouthAnalysis',
    ]);
  }, 60_000);

  it('logs a step that fails and still runs the others', async () => {
    const { log, lines } = capture();
    let analysed = false;
    await warmCallPath(
      {
        lipsync: {
          ...lipsync,
          prepare: (rig) => lipsync.prepare(rig),
          renderI420: () => Promise.reject(new Error('no')),
        },
        mouthAnalysis: {
          open: (o) => {
            analysed = true;
            return mouthAnalysis.open(o);
          },
        },
        frameDecoder: inProcessFrameDecoder,
      },
      log,
    );
    expect(lines.filter((l) => l.level >= 40).map((l) => [l.msg, l.step])).toEqual([
      ['could not warm a step of the call path', 'lipsync'],
    ]);
    expect(analysed, 'the steps after the failed one ran').toBe(true);
  }, 60_000);
});
