/**
 * A pool of lip-sync threads draws exactly what one engine draws, each frame in its place, with
 * every thread drawing its share of the batch at once; a failure of one fails the batch.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFaceRig, type FaceRig } from '../rig/index.ts';
import { portraitFrame } from '../synth/examples/make-stills.ts';
import { rgbaToI420 } from '../encode/index.ts';
import { createLipSync, createLipSyncThread, type LipSyncEngine, type LipSyncI420Item } from './index.ts';
import { lipSyncPool } from './pool.ts';

let frame: Awaited<ReturnType<typeof portraitFrame>>;
let rig: FaceRig;
let inProcess: LipSyncEngine;
let threads: LipSyncEngine[];
let pool: LipSyncEngine;

beforeAll(async () => {
  frame = await portraitFrame('grace_hopper');
  rig = await detectFaceRig(
    await sharp(frame.data, { raw: { width: 512, height: 512, channels: 4 } })
      .png()
      .toBuffer(),
  );
  [inProcess, ...threads] = await Promise.all([
    createLipSync('builtin'),
    createLipSyncThread('builtin'),
    createLipSyncThread('builtin'),
  ]);
  pool = lipSyncPool(threads);
}, 120_000);

afterAll(async () => {
  await Promise.all([inProcess?.release(), pool?.release()]);
});

const shapes = [
  { open: 0.7, wide: 0.1, round: 0 },
  { open: 0.2, wide: 0.5, round: 0.3 },
  { open: 0.5, wide: 0, round: 0.6 },
  { open: 0.9, wide: -0.3, round: 0 },
  { open: 0.3, wide: 0.2, round: 0.1 },
];

describe('a lip-sync pool', () => {
  it(
    'draws a batch exactly as one engine does, each frame in its place, I420 in place and RGBA',
    { timeout: 60_000 },
    async () => {
      const face = pool.prepare(rig);
      const i420 = rgbaToI420(frame.data, frame.width, frame.height);
      const items = (): LipSyncI420Item[] =>
        shapes.map((shape) => {
          const data = new Uint8Array(new SharedArrayBuffer(i420.length));
          data.set(i420);
          return { i420: data, width: frame.width, height: frame.height, face, shape };
        });
      const [byPool, alone] = [items(), items()];
      await pool.renderI420(byPool);
      await inProcess.renderI420(alone);
      byPool.forEach((it, i) =>
        expect(Buffer.compare(Buffer.from(it.i420), Buffer.from(alone[i]!.i420)), `frame ${i}`).toBe(0),
      );
      // Different shapes drew different frames: a frame drawn in another's place would show.
      expect(Buffer.compare(Buffer.from(alone[0]!.i420), Buffer.from(alone[1]!.i420))).not.toBe(0);

      const rgba = await pool.renderFrames(shapes.map((shape) => ({ frame, face, shape })));
      const expected = await inProcess.renderFrames(shapes.map((shape) => ({ frame, face, shape })));
      rgba.forEach((out, i) =>
        expect(Buffer.compare(Buffer.from(out), Buffer.from(expected[i]!)), `frame ${i}`).toBe(0),
      );
    },
  );

  it('gives every engine its share of a batch at once, and fails the batch when one fails', async () => {
    const started: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const fake = (k: number, fail = false): LipSyncEngine => ({
      kind: 'builtin',
      needsAudio: false,
      prepare: () => {
        throw new Error('unused');
      },
      renderFrames: async (items) => {
        started.push(k);
        await gate;
        if (fail) throw new Error(`engine ${k} failed`);
        return items.map((it) => it.frame.data);
      },
      renderI420: async () => {},
      release: async () => {},
    });
    const item = (n: number) => ({
      frame: { width: 1, height: 1, data: Uint8Array.of(n, n, n, 255) },
      face: {} as never,
      shape: shapes[0]!,
    });
    const batch = lipSyncPool([fake(0), fake(1), fake(2)]).renderFrames([0, 1, 2, 3, 4].map(item));
    await new Promise((r) => setTimeout(r, 10));
    expect(started.sort()).toEqual([0, 1, 2]);
    release();
    expect((await batch).map((f) => f[0])).toEqual([0, 1, 2, 3, 4]);
    await expect(lipSyncPool([fake(0), fake(1, true)]).renderFrames([0, 1].map(item))).rejects.toThrow(
      'engine 1 failed',
    );
    expect(() => lipSyncPool([])).toThrow(RangeError);
  });
});
