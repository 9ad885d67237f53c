/**
 * The neural lip-sync slot, end to end on a real portrait: the project's own model of the contract
 * (render/models/lipsync/tiny_wav2lip.onnx, untrained) and stand-ins of the community Wav2Lip
 * exports with exactly their interfaces (fixtures/, built by
 * render/models/build/lipsync/build_wav2lip_standins.py). Each renders through the crop and blend
 * those models were trained for, changing the lower face only and nothing outside the blend mask;
 * models that fit no contract are refused at load, naming what does not fit.
 */
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFaceRig } from '../rig/index.ts';
import type { FaceRig } from '../rig/index.ts';
import { portraitFrame } from '../synth/examples/make-stills.ts';
import { chromaAligned, i420Size, rgbaToI420 } from '../encode/index.ts';
import type { LipSyncEngine, NeuralFace } from './index.ts';
import {
  createLipSync,
  lipSyncRegion,
  LipSyncModelError,
  melSpectrogram,
  melWindow,
  NEURAL_MASK,
  parseLipSyncChoice,
  prepareFaceForNeural,
  toRect,
} from './index.ts';

const model = (rel: string): string => fileURLToPath(new URL(rel, import.meta.url));
const TINY = model('../models/lipsync/tiny_wav2lip.onnx');
const SYNTH = model('../models/synth/mouth_synth.onnx');
const fixture = (name: string) => model(`./fixtures/${name}.onnx`);

let frame: Awaited<ReturnType<typeof portraitFrame>>;
let rig: FaceRig;
let neural: LipSyncEngine;

beforeAll(async () => {
  frame = await portraitFrame('grace_hopper');
  rig = await detectFaceRig(
    await sharp(frame.data, { raw: { width: 512, height: 512, channels: 4 } })
      .png()
      .toBuffer(),
  );
  neural = await createLipSync(TINY);
}, 120_000);

afterAll(async () => {
  await neural?.release();
});

function speech(seconds: number, hz: number): Float32Array {
  const x = new Float32Array(Math.round(seconds * 16000));
  for (let i = 0; i < x.length; i++)
    x[i] = 0.4 * Math.sin((2 * Math.PI * hz * i) / 16000) * (0.5 + 0.5 * Math.sin(i / 900));
  return x;
}

const AT_REST = { open: 0, wide: 0, round: 0 };

/** The blend mask's weight at frame pixel (x, y) is 0 for sure: the pixel's crop position is outside the crop, or all four mask cells around it are 0. */
function outsideMask(face: NeuralFace, x: number, y: number): boolean {
  const c = toRect(face.rect, { x: x + 0.5, y: y + 0.5 });
  if (c.x <= 0 || c.x >= 1 || c.y <= 0 || c.y >= 1) return true;
  const G = NEURAL_MASK.grid;
  const gx = Math.min(G - 1, Math.max(0, c.x * G - 0.5));
  const gy = Math.min(G - 1, Math.max(0, c.y * G - 0.5));
  const [x0, y0] = [Math.floor(gx), Math.floor(gy)];
  const [x1, y1] = [Math.min(G - 1, x0 + 1), Math.min(G - 1, y0 + 1)];
  return (
    face.mask[y0 * G + x0] === 0 &&
    face.mask[y0 * G + x1] === 0 &&
    face.mask[y1 * G + x0] === 0 &&
    face.mask[y1 * G + x1] === 0
  );
}

/** Where a drawn RGBA frame differs from the source: pixels changed in all, above the crop's middle (the upper face), and where the mask is 0. */
function changes(face: NeuralFace, out: Uint8Array | Uint8ClampedArray, source: Uint8Array = frame.data) {
  let changed = 0;
  let upper = 0;
  let outside = 0;
  for (let y = 0; y < 512; y++) {
    for (let x = 0; x < 512; x++) {
      const i = (y * 512 + x) * 4;
      if (
        out[i] === source[i] &&
        out[i + 1] === source[i + 1] &&
        out[i + 2] === source[i + 2] &&
        out[i + 3] === source[i + 3]
      )
        continue;
      changed++;
      if (toRect(face.rect, { x: x + 0.5, y: y + 0.5 }).y < 0.5) upper++;
      if (outsideMask(face, x, y)) outside++;
    }
  }
  return { changed, upper, outside };
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
  it(
    'is all an engine needs of a frame: valid only there, a frame renders the same there (built-in and neural)',
    { timeout: 60_000 },
    async () => {
      const builtin = await createLipSync('builtin');
      try {
        for (const engine of [builtin, neural]) {
          const face = engine.prepare(rig);
          const item = {
            face,
            shape: { open: 0.7, wide: 0.2, round: 0.1 },
            mel: melWindow(melSpectrogram(speech(1, 300)), 5, 25),
          };
          const [whole] = await engine.renderFrames([{ ...item, frame }]);
          const r = chromaAligned(lipSyncRegion(face), 512, 512);
          expect(r.width * r.height).toBeLessThan((512 * 512) / 2);
          // Garbage everywhere but the region.
          const partial = new Uint8Array(frame.data.length).map((_, i) => (i * 7919) & 255);
          for (let y = r.y; y < r.y + r.height; y++)
            partial.set(frame.data.subarray((y * 512 + r.x) * 4, (y * 512 + r.x + r.width) * 4), (y * 512 + r.x) * 4);
          const [fromPartial] = await engine.renderFrames([
            { ...item, frame: { ...frame, data: partial }, target: partial },
          ]);
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
    },
  );
});

describe("a neural model's crop and blend mask", () => {
  it('crops the brows to below the chin and the oval across, turned with the eyes; the mask covers the lower face only, feathered, zero at the crop edges', () => {
    const face = prepareFaceForNeural(rig);
    const lm = rig.landmarks;
    const at = (i: number) => toRect(face.rect, lm[i]!);
    // Across: the oval's extremes at the crop's sides; down: the brows near the top, the chin near the bottom.
    expect(Math.min(at(234).x, at(454).x)).toBeCloseTo(0, 5);
    expect(Math.max(at(234).x, at(454).x)).toBeCloseTo(1, 5);
    expect(at(105).y).toBeGreaterThan(0);
    expect(at(105).y).toBeLessThan(0.1);
    expect(at(152).y).toBeGreaterThan(0.9);
    expect(at(152).y).toBeLessThan(1);
    expect(face.rect.height).toBeGreaterThan(face.rect.width); // non-square, as Wav2Lip's box is
    const G = NEURAL_MASK.grid;
    const weight = (p: { x: number; y: number }) =>
      face.mask[Math.min(G - 1, Math.floor(p.y * G)) * G + Math.min(G - 1, Math.floor(p.x * G))]!;
    expect(weight(at(13))).toBe(255); // the lips: replaced
    expect(weight(at(1))).toBe(0); // the nose tip: the upper half is never replaced
    expect(weight(at(159))).toBe(0); // an eye
    expect(weight({ x: 0.12, y: 0.95 })).toBe(0); // below the jaw line, beside the chin
    for (let k = 0; k < G; k++) {
      for (const cell of [k, (G - 1) * G + k, k * G, k * G + G - 1])
        expect(face.mask[cell], `edge cell ${cell}`).toBe(0);
    }
    // Feathered: between none and all, values in between.
    expect(new Set(face.mask).size).toBeGreaterThan(50);
  });
});

describe('neural lip-sync slot (Wav2Lip contract)', () => {
  it(
    'runs a model of the contract end to end, batched, changing only the lower face under its mask',
    { timeout: 60_000 },
    async () => {
      expect(neural.kind).toBe('neural');
      expect(neural.needsAudio).toBe(true);
      const face = neural.prepare(rig) as NeuralFace;
      const melA = melSpectrogram(speech(1, 180));
      const melB = melSpectrogram(speech(1, 2500));
      const outs = await neural.renderFrames([
        { frame, face, shape: AT_REST, mel: melWindow(melA, 3, 25) },
        { frame, face, shape: AT_REST, mel: melWindow(melB, 3, 25) },
      ]);
      expect(outs).toHaveLength(2);
      const c = changes(face, outs[0]!);
      expect(c.changed).toBeGreaterThan(1000);
      expect(c.upper).toBe(0);
      expect(c.outside).toBe(0);
      let differAB = 0;
      for (let i = 0; i < outs[0]!.length; i++) if (outs[0]![i] !== outs[1]![i]) differAB++;
      expect(differAB).toBeGreaterThan(100); // the audio reaches the output
      // One frame alone gives what it gave in the batch.
      const [single] = await neural.renderFrames([{ frame, face, shape: AT_REST, mel: melWindow(melA, 3, 25) }]);
      let maxDiff = 0;
      for (let i = 0; i < single!.length; i++) maxDiff = Math.max(maxDiff, Math.abs(single![i]! - outs[0]![i]!));
      expect(maxDiff).toBeLessThanOrEqual(1);
      await expect(neural.renderFrames([{ frame, face, shape: AT_REST }])).rejects.toThrow(/mel window/);
    },
  );

  it('leaves a frame exactly as it is for a window of silence', async () => {
    const face = neural.prepare(rig);
    const [out] = await neural.renderFrames([{ frame, face, shape: AT_REST, mel: new Float32Array(80 * 16).fill(-4) }]);
    expect(Buffer.compare(Buffer.from(out!), frame.data)).toBe(0);
  });
});

/** The community exports' interfaces (render/models/build/lipsync/build_wav2lip_standins.py) and what the slot reads of each. */
const EXPORTS = [
  {
    file: 'wav2lip_reference',
    what: "Rudrabha's Wav2Lip",
    melInput: 'audio_sequences',
    faceInput: 'face_sequences',
    output: 'output',
    faceSize: 96,
    fixedBatch: false,
  },
  {
    file: 'facefusion_wav2lip_96',
    what: "FaceFusion's wav2lip_96 / wav2lip_gan_96",
    melInput: 'source',
    faceInput: 'target',
    output: 'output',
    faceSize: 96,
    fixedBatch: true,
  },
  {
    file: 'wav2lip_hq_96',
    what: "instant-high's wav2lip.onnx / wav2lip_gan.onnx",
    melInput: 'mel_spectrogram',
    faceInput: 'video_frames',
    output: 'output',
    faceSize: 96,
    fixedBatch: true,
  },
  {
    file: 'wav2lip_hq_256',
    what: "instant-high's wav2lip_256.onnx",
    melInput: 'mel_spectrogram',
    faceInput: 'video_frames',
    output: 'predicted_frames',
    faceSize: 256,
    fixedBatch: true,
  },
  {
    file: 'wav2lip_adhoc',
    what: 'an ad-hoc export (mel + image, dynamic batch)',
    melInput: 'mel',
    faceInput: 'image',
    output: 'output',
    faceSize: 96,
    fixedBatch: false,
  },
  {
    file: 'face_output_second',
    what: 'a model whose face is its second output',
    melInput: 'mel',
    faceInput: 'face',
    output: 'face_out',
    faceSize: 96,
    fixedBatch: false,
  },
] as const;

describe('the community Wav2Lip exports, as they are', () => {
  const mel = melSpectrogram(speech(1, 300));
  for (const x of EXPORTS) {
    it(
      `loads ${x.what} (${x.melInput} + ${x.faceInput} -> ${x.output}, ${x.faceSize}px, ${x.fixedBatch ? 'one frame per run' : 'batched'}) and draws only the lower face, RGBA and I420`,
      { timeout: 60_000 },
      async () => {
        const engine = await createLipSync(fixture(x.file));
        try {
          expect(engine.contract).toEqual({
            melInput: x.melInput,
            faceInput: x.faceInput,
            faceOutputs: [x.output],
            faceSize: x.faceSize,
            fixedBatch: x.fixedBatch,
          });
          const face = engine.prepare(rig) as NeuralFace;
          const windows = [2, 9, 16].map((i) => melWindow(mel, i, 25));
          const outs = await engine.renderFrames(windows.map((w) => ({ frame, face, shape: AT_REST, mel: w })));
          const c = changes(face, outs[0]!);
          expect(c.changed, 'pixels changed').toBeGreaterThan(1000);
          expect(c.upper, 'pixels changed in the upper face').toBe(0);
          expect(c.outside, 'pixels changed where the mask is 0').toBe(0);
          expect(Buffer.compare(Buffer.from(outs[0]!), Buffer.from(outs[1]!)), 'two windows, two mouths').not.toBe(0);
          // One by one, or in one batch: the same frames.
          const [alone] = await engine.renderFrames([{ frame, face, shape: AT_REST, mel: windows[1]! }]);
          expect(Buffer.compare(Buffer.from(alone!), Buffer.from(outs[1]!))).toBe(0);

          // I420 in place: luma and chroma written under the mask only.
          const source = rgbaToI420(frame.data, 512, 512);
          const i420 = Uint8Array.from(source);
          await engine.renderI420([{ i420, width: 512, height: 512, face, shape: AT_REST, mel: windows[0]! }]);
          let luma = 0;
          for (let y = 0; y < 512; y++) {
            for (let px = 0; px < 512; px++) {
              if (i420[y * 512 + px] === source[y * 512 + px]) continue;
              luma++;
              if (outsideMask(face, px, y)) throw new Error(`luma (${px}, ${y}) changed where the mask is 0`);
            }
          }
          expect(luma).toBeGreaterThan(1000);
          for (let plane = 0; plane < 2; plane++) {
            const base = 512 * 512 + plane * 256 * 256;
            for (let q = 0; q < 256 * 256; q++) {
              if (i420[base + q] === source[base + q]) continue;
              const [cx, cy] = [(q % 256) * 2 + 0.5, Math.floor(q / 256) * 2 + 0.5]; // the block's centre, as a pixel
              if (outsideMask(face, cx, cy))
                throw new Error(`chroma (${q % 256}, ${Math.floor(q / 256)}) changed where the mask is 0`);
            }
          }
          expect(i420.length).toBe(i420Size(512, 512));
        } finally {
          await engine.release();
        }
      },
    );
  }
});

describe('models that fit no contract', () => {
  it('are refused when they load, naming what does not fit', async () => {
    const refusal = async (path: string) => {
      const err = await createLipSync(path).then(
        async (e) => {
          await e.release();
          throw new Error(`${path} loaded`);
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(LipSyncModelError);
      return (err as LipSyncModelError).message;
    };
    expect(await refusal(fixture('misfit_rgb_face'))).toMatch(
      /is not a Wav2Lip-class lip-sync model: input `x` has 3 channels; a Wav2Lip-class model has a 1-channel mel \[N,1,80,16\] and a 6-channel face \[N,6,H,H\]$/,
    );
    expect(await refusal(fixture('misfit_batch4'))).toMatch(
      /input `mel` float32 \[4,1,80,16\] has a fixed batch of 4; a Wav2Lip-class model takes a batch of 1 or a dynamic one/,
    );
    expect(await refusal(fixture('misfit_nonsquare'))).toMatch(
      /the face input `face` float32 \[1,6,96,128\] is 96x128; the face crop is square/,
    );
    expect(await refusal(fixture('bad_output'))).toMatch(
      /none of its outputs is a face \[N,3,96,96\] for its 96x96 face input \(`out` float32 \[\?,3,48,48\]\)/,
    );
    expect(await refusal(SYNTH)).toMatch(
      /it has 4 inputs \(`lips` .*`shape` .*`palette` .*`size` .*\); a Wav2Lip-class model has/,
    );
    expect(await refusal('/nonexistent/wav2lip.onnx')).toMatch(/not found/);
  });
});
