/**
 * The neural lip-sync slot, end to end on a real portrait with the project's
 * own model of the contract (render/models/lipsync/tiny_wav2lip.onnx,
 * untrained), through the same crop/composite path as the built-in engine;
 * models that break the contract are refused with a clear error.
 */
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFaceRig } from '../rig/index.ts';
import type { FaceRig } from '../rig/index.ts';
import { portraitFrame } from '../synth/examples/make-stills.ts';
import { toCrop } from '../synth/prepare.ts';
import type { LipSyncEngine } from './index.ts';
import { chromaAligned } from '../encode/frames.ts';
import { createLipSync, lipSyncRegion, LipSyncModelError, melSpectrogram, melWindow, parseLipSyncChoice } from './index.ts';

const model = (rel: string): string => fileURLToPath(new URL(rel, import.meta.url));
const TINY = model('../models/lipsync/tiny_wav2lip.onnx');
const BAD_OUTPUT = model('./fixtures/bad_output.onnx');
const SYNTH = model('../models/synth/mouth_synth.onnx');

let frame: Awaited<ReturnType<typeof portraitFrame>>;
let rig: FaceRig;
let neural: LipSyncEngine;

beforeAll(async () => {
  frame = await portraitFrame('grace_hopper');
  rig = await detectFaceRig(await sharp(frame.data, { raw: { width: 512, height: 512, channels: 4 } }).png().toBuffer());
  neural = await createLipSync(TINY);
}, 120_000);

afterAll(async () => {
  await neural?.release();
});

function speech(seconds: number, hz: number): Float32Array {
  const x = new Float32Array(Math.round(seconds * 16000));
  for (let i = 0; i < x.length; i++) x[i] = 0.4 * Math.sin((2 * Math.PI * hz * i) / 16000) * (0.5 + 0.5 * Math.sin(i / 900));
  return x;
}

describe('lip-sync model selection', () => {
  it('reads LIPSYNC_MODEL: builtin by default, a path to an .onnx otherwise', () => {
    expect(parseLipSyncChoice(undefined)).toEqual({ kind: 'builtin' });
    expect(parseLipSyncChoice(' builtin ')).toEqual({ kind: 'builtin' });
    expect(parseLipSyncChoice('/models/wav2lip.onnx')).toEqual({ kind: 'onnx', path: '/models/wav2lip.onnx' });
    expect(() => parseLipSyncChoice('wav2lip.pth')).toThrow(LipSyncModelError);
  });

  it('gives the built-in engine for "builtin"', async () => {
    const builtin = await createLipSync('builtin');
    try {
      expect(builtin.kind).toBe('builtin');
      expect(builtin.needsAudio).toBe(false);
      const face = builtin.prepare(rig);
      const [out] = await builtin.renderFrames([{ frame, face, shape: { open: 0.6, wide: 0, round: 0 } }]);
      expect(Buffer.compare(Buffer.from(out!), frame.data)).not.toBe(0);
    } finally {
      await builtin.release();
    }
  });
});

describe('the lip-sync region of a face', () => {
  it('is all an engine needs of a frame: valid only there, a frame renders the same there (built-in and neural)', { timeout: 60_000 }, async () => {
    const builtin = await createLipSync('builtin');
    try {
      for (const engine of [builtin, neural]) {
        const face = engine.prepare(rig);
        const item = { face, shape: { open: 0.7, wide: 0.2, round: 0.1 }, mel: melWindow(melSpectrogram(speech(1, 300)), 5, 25) };
        const [whole] = await engine.renderFrames([{ ...item, frame }]);
        const r = chromaAligned(lipSyncRegion(face), 512, 512);
        expect(r.width * r.height).toBeLessThan(512 * 512 / 2);
        // Garbage everywhere but the region.
        const partial = new Uint8Array(frame.data.length).map((_, i) => (i * 7919) & 255);
        for (let y = r.y; y < r.y + r.height; y++) partial.set(frame.data.subarray((y * 512 + r.x) * 4, (y * 512 + r.x + r.width) * 4), (y * 512 + r.x) * 4);
        const [fromPartial] = await engine.renderFrames([{ ...item, frame: { ...frame, data: partial }, target: partial }]);
        let differ = 0;
        let changed = 0;
        for (let y = 0; y < 512; y++) {
          for (let x = 0; x < 512; x++) {
            const i = (y * 512 + x) * 4;
            const inside = x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height;
            if (!inside && whole![i] !== frame.data[i]) changed++;
            if (inside && whole![i] !== fromPartial![i]) differ++;
          }
        }
        expect(changed, `${engine.kind}: pixels changed outside the region`).toBe(0);
        expect(differ, `${engine.kind}: pixels of the region that depend on pixels outside it`).toBe(0);
      }
    } finally {
      await builtin.release();
    }
  });
});

describe('neural lip-sync slot (Wav2Lip contract)', () => {
  it('runs a model of the contract end to end, batched, changing only the lower face', { timeout: 60_000 }, async () => {
    expect(neural.kind).toBe('neural');
    expect(neural.needsAudio).toBe(true);
    const face = neural.prepare(rig);
    const melA = melSpectrogram(speech(1, 180));
    const melB = melSpectrogram(speech(1, 2500));
    const shape = { open: 0, wide: 0, round: 0 };
    const outs = await neural.renderFrames([
      { frame, face, shape, mel: melWindow(melA, 3, 25) },
      { frame, face, shape, mel: melWindow(melB, 3, 25) },
    ]);
    expect(outs).toHaveLength(2);
    let changedOutside = 0;
    let changedUpper = 0;
    let changedLower = 0;
    let differAB = 0;
    for (let y = 0; y < 512; y++) {
      for (let x = 0; x < 512; x++) {
        const i = (y * 512 + x) * 4;
        const c = toCrop(face.box, { x: x + 0.5, y: y + 0.5 });
        const changed = outs[0]![i] !== frame.data[i] || outs[0]![i + 1] !== frame.data[i + 1] || outs[0]![i + 2] !== frame.data[i + 2];
        if (c.x < 0 || c.x > 1 || c.y < 0 || c.y > 1) changedOutside += changed ? 1 : 0;
        else if (c.y < 0.4) changedUpper += changed ? 1 : 0;
        else changedLower += changed ? 1 : 0;
        if (outs[0]![i] !== outs[1]![i]) differAB++;
      }
    }
    expect(changedOutside).toBe(0);
    expect(changedUpper).toBe(0);
    expect(changedLower).toBeGreaterThan(1000);
    expect(differAB).toBeGreaterThan(100); // the audio reaches the output
    // One frame alone gives what it gave in the batch.
    const [single] = await neural.renderFrames([{ frame, face, shape, mel: melWindow(melA, 3, 25) }]);
    let maxDiff = 0;
    for (let i = 0; i < single!.length; i++) maxDiff = Math.max(maxDiff, Math.abs(single![i]! - outs[0]![i]!));
    expect(maxDiff).toBeLessThanOrEqual(1);
    await expect(neural.renderFrames([{ frame, face, shape }])).rejects.toThrow(/mel window/);
  });

  it('refuses models that break the contract, saying why', async () => {
    await expect(createLipSync(BAD_OUTPUT)).rejects.toThrow(LipSyncModelError);
    await expect(createLipSync(BAD_OUTPUT)).rejects.toThrow(/does not follow the lip-sync model contract.*\[1,3,48,48\]|output is out float32 \[.*48,48\]/);
    await expect(createLipSync(SYNTH)).rejects.toThrow(/does not follow the lip-sync model contract.*3 inputs/);
    await expect(createLipSync('/nonexistent/wav2lip.onnx')).rejects.toThrow(/not found/);
  });
});
