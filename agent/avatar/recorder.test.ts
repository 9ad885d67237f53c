import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { i420Size, resolveFfmpegPath } from '../../render/encode/index.ts';
import { CallRecorder } from './recorder.ts';

const SR = 24_000;
const FPS = 25;
const SPF = SR / FPS;

function probeDurations(file: string): { video: number; audio: number } {
  const r = spawnSync(resolveFfmpegPath(), ['-hide_banner', '-i', file, '-f', 'null', '-'], { encoding: 'utf8' });
  const time = [...r.stderr.matchAll(/time=(\d+):(\d+):([\d.]+)/g)].at(-1)!;
  const seconds = Number(time[1]) * 3600 + Number(time[2]) * 60 + Number(time[3]);
  const input = r.stderr.split('Stream mapping')[0]!;
  const streams = input.match(/Stream #0:\d+.*?: (Video|Audio)/g) ?? [];
  expect(streams.length, r.stderr.slice(-500)).toBe(2);
  return { video: seconds, audio: seconds };
}

/** Mean luma (the Y plane as stored) of each frame of `file`, decoded by ffmpeg. */
function frameLumas(file: string, w: number): number[] {
  const r = spawnSync(resolveFfmpegPath(), ['-v', 'error', '-i', file, '-f', 'rawvideo', '-pix_fmt', 'yuv420p', '-'], {
    maxBuffer: 1 << 28,
  });
  const out: number[] = [];
  for (let off = 0; off + i420Size(w, w) <= r.stdout.length; off += i420Size(w, w)) {
    let sum = 0;
    for (let i = off; i < off + w * w; i++) sum += r.stdout[i]!;
    out.push(sum / (w * w));
  }
  return out;
}

describe('call recorder', () => {
  it(
    'records each frame as published though the caller reuses its buffer at once, and a skipped frame as the one before it',
    { timeout: 60_000 },
    async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'recorder-'));
      const file = path.join(dir, 'call.mp4');
      // Frames larger than a pipe's kernel buffer: they wait in the writer while the next ones come.
      const w = 256;
      const rec = new CallRecorder({
        path: file,
        width: w,
        height: w,
        fps: FPS,
        sampleRate: SR,
        startFrame: 0,
        startSample: 0,
      });
      const level = (n: number) => 40 + (n % 8) * 20;
      const frame = new Uint8Array(i420Size(w, w));
      for (let n = 0; n < 40; n++) {
        if (n === 20) continue;
        frame.fill(level(n), 0, w * w);
        frame.fill(128, w * w);
        rec.video(n, frame);
        await new Promise((r) => setImmediate(r));
      }
      await rec.finish(40 * SPF);
      expect(rec.dropped).toBe(0);
      const lumas = frameLumas(file, w);
      expect(lumas).toHaveLength(40);
      lumas.forEach((luma, n) => expect(Math.abs(luma - level(n === 20 ? 19 : n)), `frame ${n}`).toBeLessThan(4));
    },
  );

  it(
    'keeps the audio clock when the first frame comes late (each frame before it is that frame) and when the encoder falls behind (a frame is the last one again, never shifted)',
    { timeout: 60_000 },
    async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'recorder-'));
      const file = path.join(dir, 'call.mp4');
      const w = 256;
      // The recording starts at frame 10; the call shows frames from 15 on (5 frames went by while it started).
      const rec = new CallRecorder({
        path: file,
        width: w,
        height: w,
        fps: FPS,
        sampleRate: SR,
        startFrame: 10,
        startSample: 10 * SPF,
      });
      const level = (n: number) => 40 + (n % 8) * 20;
      const frame = new Uint8Array(i420Size(w, w));
      // 100 frames at once, faster than any encoder: most wait, so the queue's bound is reached.
      for (let n = 15; n < 115; n++) {
        frame.fill(level(n), 0, w * w);
        frame.fill(128, w * w);
        rec.video(n, frame);
      }
      await rec.finish(115 * SPF);
      expect(rec.leadInFrames).toBe(5);
      expect(rec.dropped, 'frames recorded again as the one before (encoder behind)').toBeGreaterThan(0);
      const lumas = frameLumas(file, w);
      // One picture per frame from the start: frame n of the call is picture n - 10 of the file.
      expect(lumas).toHaveLength(105);
      for (let k = 0; k < 5; k++) expect(Math.abs(lumas[k]! - level(15)), `picture ${k}`).toBeLessThan(4);
      // Each picture shows its frame or, where the encoder was behind, an earlier one: never a later one.
      const shown = lumas.map((luma) => [...Array(8).keys()].find((i) => Math.abs(luma - (40 + i * 20)) < 4));
      expect(shown.every((s) => s !== undefined)).toBe(true);
      expect(Math.abs(lumas[5]! - level(15))).toBeLessThan(4);
      expect(Math.abs(lumas[6]! - level(16))).toBeLessThan(4);
    },
  );

  it(
    'writes a long call without stalling, on one clock, whatever the cadence of the audio (here: once a second, 0.3 s behind the video)',
    { timeout: 120_000 },
    async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'recorder-'));
      const file = path.join(dir, 'call.mp4');
      const w = 64;
      const rec = new CallRecorder({
        path: file,
        width: w,
        height: w,
        fps: FPS,
        sampleRate: SR,
        startFrame: 100,
        startSample: 100 * SPF,
      });
      const frame = new Uint8Array(i420Size(w, w)).fill(128);
      const seconds = 30;
      let maxPending = 0;
      for (let n = 100; n < 100 + seconds * FPS; n++) {
        // The avatar's audio is pushed ahead of playout; the user's arrives at playout.
        rec.avatarAudio((n + 3) * SPF, new Int16Array(SPF).fill(n % 50 < 25 ? 3000 : 0));
        rec.userAudio(n * SPF, new Int16Array(SPF).fill(500));
        frame[0] = n % 256;
        rec.video(n, frame);
        // Video then runs more than the MP4 writer lets a track run ahead: writes of one track must not wait behind the other's.
        if (n % FPS === 0) rec.flushAudio(n * SPF - 0.3 * SR);
        maxPending = Math.max(maxPending, rec.heldSamples);
        // Five times real time: frames come at 8 ms intervals, as a call's come at 40 ms.
        await new Promise((r) => setTimeout(r, 8));
      }
      const result = await rec.finish((100 + seconds * FPS) * SPF);
      expect(result.durationSeconds).toBeCloseTo(seconds, 0);
      expect(result.sizeBytes).toBeGreaterThan(1000);
      expect(rec.dropped).toBe(0);
      const d = probeDurations(file);
      expect(Math.abs(d.video - seconds)).toBeLessThan(0.2);
      // Memory stays flat: only the not-yet-written part of the mix is held (a few seconds at most).
      expect(maxPending).toBeLessThan(SR * 4);
    },
  );

  it(
    "leaves out the avatar's audio that was dropped unplayed (an interruption), and keeps the user's",
    { timeout: 60_000 },
    async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'recorder-'));
      const file = path.join(dir, 'call.mp4');
      const w = 64;
      const rec = new CallRecorder({
        path: file,
        width: w,
        height: w,
        fps: FPS,
        sampleRate: SR,
        startFrame: 0,
        startSample: 0,
      });
      const frame = new Uint8Array(i420Size(w, w)).fill(128);
      for (let n = 0; n < 2 * FPS; n++) {
        // The avatar's audio is handed over 100 ms ahead of playout; at 1 s it is interrupted.
        if (n < FPS) rec.avatarAudio((n + 2.5) * SPF, new Int16Array(SPF).fill(4000));
        if (n === FPS) rec.avatarAudioDropped(n * SPF);
        rec.userAudio(n * SPF, new Int16Array(SPF).fill(300));
        rec.video(n, frame);
        if (n % 5 === 0) rec.flushAudio(n * SPF - 0.15 * SR);
      }
      await rec.finish(2 * FPS * SPF);
      const r = spawnSync(
        resolveFfmpegPath(),
        ['-v', 'error', '-i', file, '-f', 's16le', '-ac', '1', '-ar', String(SR), '-'],
        { maxBuffer: 1 << 26 },
      );
      const pcm = new Int16Array(r.stdout.buffer, r.stdout.byteOffset, r.stdout.length >> 1);
      const level = (from: number, to: number) => {
        let sum = 0;
        for (let i = Math.round(from * SR); i < Math.round(to * SR); i++) sum += pcm[i]!;
        return sum / ((to - from) * SR);
      };
      // AAC keeps a DC level only roughly: compare the bands, not exact values.
      expect(level(0.5, 0.95)).toBeGreaterThan(3000);
      expect(level(1.02, 1.09)).toBeLessThan(800);
      expect(level(1.02, 1.09)).toBeGreaterThan(100);
    },
  );
});
