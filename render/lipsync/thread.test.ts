/**
 * The lip-sync engine in a worker thread draws what the engine draws in process: in place on
 * frames in SharedArrayBuffers, copied back otherwise, and in place on I420 frames (what a live
 * call publishes) with the conversions done in the thread; its errors reach the caller, and a bad
 * batch does not stop the next.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFaceRig, type FaceRig } from '../rig/index.ts';
import { portraitFrame } from '../synth/examples/make-stills.ts';
import { chromaAligned, i420Size, rgbaToI420 } from '../encode/index.ts';
import {
  createLipSync,
  createLipSyncThread,
  lipSyncRegion,
  LipSyncModelError,
  type LipSyncEngine,
  type LipSyncI420Item,
} from './index.ts';

let frame: Awaited<ReturnType<typeof portraitFrame>>;
let rig: FaceRig;
let inProcess: LipSyncEngine;
let threaded: LipSyncEngine;

beforeAll(async () => {
  frame = await portraitFrame('grace_hopper');
  rig = await detectFaceRig(
    await sharp(frame.data, { raw: { width: 512, height: 512, channels: 4 } })
      .png()
      .toBuffer(),
  );
  [inProcess, threaded] = await Promise.all([createLipSync('builtin'), createLipSyncThread('builtin')]);
}, 120_000);

afterAll(async () => {
  await Promise.all([inProcess?.release(), threaded?.release()]);
});

function shared(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(new SharedArrayBuffer(bytes.length));
  out.set(bytes);
  return out;
}

describe('a lip-sync engine in a thread', () => {
  it(
    'draws exactly what the engine draws in process, in place on shared frames and copied back otherwise',
    { timeout: 60_000 },
    async () => {
      expect(threaded.kind).toBe('builtin');
      expect(threaded.needsAudio).toBe(false);
      const face = threaded.prepare(rig);
      expect(face).toEqual(inProcess.prepare(rig));
      const shapes = [
        { open: 0.7, wide: 0.1, round: 0 },
        { open: 0.2, wide: 0.5, round: 0.3 },
      ];
      const expected = await inProcess.renderFrames(shapes.map((shape) => ({ frame, face, shape })));

      const sharedFrames = shapes.map(() => shared(frame.data));
      const inPlace = await threaded.renderFrames(
        shapes.map((shape, i) => ({
          frame: { ...frame, data: sharedFrames[i]! },
          face,
          shape,
          target: sharedFrames[i]!,
        })),
      );
      inPlace.forEach((out, i) => {
        expect(out).toBe(sharedFrames[i]);
        expect(Buffer.compare(Buffer.from(out), Buffer.from(expected[i]!))).toBe(0);
      });

      const targets = shapes.map(() => new Uint8Array(frame.data.length));
      const copied = await threaded.renderFrames(
        shapes.map((shape, i) => ({ frame, face, shape, target: targets[i]! })),
      );
      copied.forEach((out, i) => {
        expect(out).toBe(targets[i]);
        expect(Buffer.compare(Buffer.from(out), Buffer.from(expected[i]!))).toBe(0);
      });
      // A batch of one against the same batch in process: onnxruntime's kernels may round a
      // batch of two a level differently here and there (one pixel by one level, on one CPU).
      const [fresh] = await threaded.renderFrames([{ frame, face, shape: shapes[0]! }]);
      const [single] = await inProcess.renderFrames([{ frame, face, shape: shapes[0]! }]);
      expect(Buffer.compare(Buffer.from(fresh!), Buffer.from(single!))).toBe(0);
      // The caller's frame was read, not written.
      expect(Buffer.compare(Buffer.from(frame.data), Buffer.from((await portraitFrame('grace_hopper')).data))).toBe(0);
    },
  );

  it(
    'draws the mouth into shared I420 frames in place, as the engine does in process, touching nothing outside the lip-sync region',
    { timeout: 60_000 },
    async () => {
      const face = threaded.prepare(rig);
      const source = rgbaToI420(frame.data, 512, 512);
      const shapes = [
        { open: 0.7, wide: 0.1, round: 0 },
        { open: 0.2, wide: 0.5, round: 0.3 },
      ];
      const items = (engine: 'shared' | 'own'): LipSyncI420Item[] =>
        shapes.map((shape) => {
          const buffer = (n: number) =>
            engine === 'shared' ? new Uint8Array(new SharedArrayBuffer(n)) : new Uint8Array(n);
          const i420 = buffer(i420Size(512, 512));
          i420.set(source);
          return { i420, width: 512, height: 512, face, shape };
        });
      const expected = items('own');
      await inProcess.renderI420(expected);
      const drawn = items('shared');
      await threaded.renderI420(drawn);

      const region = chromaAligned(lipSyncRegion(face), 512, 512);
      drawn.forEach((item, i) => {
        expect(Buffer.compare(Buffer.from(item.i420), Buffer.from(expected[i]!.i420))).toBe(0);
        // The mouth moved, and only inside the region (luma rows checked; chroma follows the same rect).
        let inside = 0;
        for (let y = 0; y < 512; y++) {
          for (let x = 0; x < 512; x++) {
            const changed = item.i420[y * 512 + x] !== source[y * 512 + x];
            const within =
              x >= region.x && x < region.x + region.width && y >= region.y && y < region.y + region.height;
            if (changed && !within) throw new Error(`pixel (${x}, ${y}) outside the lip-sync region changed`);
            if (changed) inside++;
          }
        }
        expect(inside).toBeGreaterThan(200);
      });
      // Posted, buffers that are not shared would come back unchanged: refused instead.
      await expect(threaded.renderI420(items('own'))).rejects.toThrow(/SharedArrayBuffer/);
    },
  );

  it("fails a bad batch with the engine's own error and draws the next one", { timeout: 60_000 }, async () => {
    const face = threaded.prepare(rig);
    const small = { data: new Uint8Array(64 * 64 * 4), width: 64, height: 64 };
    const err = (await inProcess
      .renderFrames([{ frame: small, face, shape: { open: 0.5, wide: 0, round: 0 } }])
      .catch((e: unknown) => e)) as Error;
    await expect(
      threaded.renderFrames([{ frame: small, face, shape: { open: 0.5, wide: 0, round: 0 } }]),
    ).rejects.toThrow(err.message);
    const [out] = await threaded.renderFrames([{ frame, face, shape: { open: 0.5, wide: 0, round: 0 } }]);
    expect(Buffer.compare(Buffer.from(out!), Buffer.from(frame.data))).not.toBe(0);
  });

  it('refuses a model that cannot load with the LipSyncModelError the engine gives', async () => {
    const err = await createLipSyncThread('/nonexistent/wav2lip.onnx').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LipSyncModelError);
    expect((err as LipSyncModelError).message).toMatch(/not found/);
    expect((err as LipSyncModelError).model).toBe('/nonexistent/wav2lip.onnx');
  });

  it('refuses to draw once released', async () => {
    const engine = await createLipSyncThread('builtin');
    await engine.release();
    await engine.release();
    await expect(
      engine.renderFrames([{ frame, face: engine.prepare(rig), shape: { open: 0.5, wide: 0, round: 0 } }]),
    ).rejects.toThrow(/released/);
  });
});
