/**
 * The built-in mouth synthesis on real portraits (render/rig/fixtures),
 * fitted into 512x512 frames as the product renders them: identity at rest,
 * the mouth opening with `open` (measured by running the face rig again on
 * the output), corners moving with `wide`, nothing written outside the crop,
 * and a batch equal to single runs; drawn straight on I420 (a live call's
 * frames), the same picture as drawn on RGBA and converted.
 */
import * as ort from '../onnx/runtime.ts';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFaceRig } from '../rig/index.ts';
import type { FaceRig } from '../rig/index.ts';
import { i420Size, i420ToRgba, rgbaToI420 } from '../encode/index.ts';
import { portraitFrame } from './examples/make-stills.ts';
import { SYNTH_KEYPOINT_COUNT, synthReadRegion } from './contract.ts';
import { cropToRgba } from './image.ts';
import { createMouthSynth, MOUTH_PALETTE_MODEL, prepareFaceForSynth, toCrop } from './index.ts';
import type { MouthShape, MouthSynth, PreparedFace, RgbaFrame } from './index.ts';
import { luma } from './quality.ts';

const SLOW = { timeout: 120_000 };

interface Subject {
  frame: RgbaFrame & { data: Buffer };
  rig: FaceRig;
  face: PreparedFace;
}

let synth: MouthSynth;
const subjects: Record<string, Subject> = {};

async function rigOf(frame: RgbaFrame): Promise<FaceRig> {
  const png = await sharp(Buffer.from(frame.data), { raw: { width: frame.width, height: frame.height, channels: 4 } })
    .png()
    .toBuffer();
  return detectFaceRig(png);
}

beforeAll(async () => {
  synth = await createMouthSynth();
  for (const name of ['grace_hopper', 'astronaut']) {
    const frame = await portraitFrame(name);
    const rig = await rigOf(frame);
    subjects[name] = { frame, rig, face: prepareFaceForSynth(rig) };
  }
}, 120_000);

afterAll(async () => {
  await synth?.release();
});

const shape = (open: number, wide = 0, round = 0): MouthShape => ({ open, wide, round });

function diffStats(
  a: Uint8Array | Uint8ClampedArray,
  b: Uint8Array | Uint8ClampedArray,
): { max: number; mean: number } {
  let max = 0;
  let sum = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (d > max) max = d;
    sum += d;
  }
  return { max, mean: sum / a.length };
}

function pearson(xs: number[], ys: number[]): number {
  const n = xs.length;
  const mx = xs.reduce((s, v) => s + v, 0) / n;
  const my = ys.reduce((s, v) => s + v, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my);
    sxx += (xs[i]! - mx) ** 2;
    syy += (ys[i]! - my) ** 2;
  }
  return sxy / Math.sqrt(sxx * syy);
}

describe('mouth synthesis on real portraits (512x512)', () => {
  it('leaves the frame exactly as it was at shape (0,0,0), and changes it only slightly for a tiny shape', async () => {
    for (const { frame, face } of Object.values(subjects)) {
      const out = await synth.renderFrame(frame, face, shape(0));
      expect(diffStats(out, frame.data).max).toBe(0);
      // No jump between silence and the first frames of speech: a tiny shape moves edges by a
      // fraction of a pixel (a few levels where the lips' edge is sharp) and nothing else.
      const tiny = diffStats(await synth.renderFrame(frame, face, shape(0.01)), frame.data);
      const small = diffStats(await synth.renderFrame(frame, face, shape(0.1)), frame.data);
      expect(tiny.max).toBeLessThanOrEqual(16);
      expect(tiny.mean).toBeLessThan(0.02);
      expect(tiny.mean).toBeLessThan(0.15 * small.mean);
    }
  });

  it('opens the mouth in proportion to `open` (the rig, run again on the output, agrees)', SLOW, async () => {
    const opens = [0, 0.2, 0.4, 0.6, 0.8, 1];
    for (const [name, { frame, face, rig }] of Object.entries(subjects)) {
      const measured: number[] = [];
      const darkCounts: number[] = [];
      for (const open of opens) {
        const out = await synth.renderFrame(frame, face, shape(open));
        const again = await rigOf({ ...frame, data: out });
        measured.push(again.mouthOpenness);
        darkCounts.push(darkPixelsInMouth(out, frame.data, face));
      }
      for (let i = 1; i < opens.length; i++) {
        // (the rig's own reading of a small opening jitters by a few thousandths on a toothy smile: the
        // astronaut reads 0.1695 at open 0.1 and 0.1655 at 0.2, the same as at rest)
        expect(measured[i], `${name}: openness at open=${opens[i]} (${measured.join(', ')})`).toBeGreaterThan(
          measured[i - 1]! - 0.002,
        );
        expect(darkCounts[i], `${name}: newly dark pixels at open=${opens[i]}`).toBeGreaterThanOrEqual(
          darkCounts[i - 1]!,
        );
      }
      expect(pearson(opens, measured)).toBeGreaterThan(0.9);
      expect(pearson(opens, darkCounts)).toBeGreaterThan(0.9);
      // At rest the rig measures the portrait itself; fully open is clearly open (a conversational
      // "ah" parts the lips by about a quarter of the mouth's width).
      expect(measured[0]).toBeCloseTo(rig.mouthOpenness, 2);
      expect(measured.at(-1)!, `${name}: ${measured.join(', ')}`).toBeGreaterThan(
        Math.max(0.22, rig.mouthOpenness + 0.08),
      );
    }
  });

  it('moves the mouth corners outward with `wide` and inward with negative `wide`', SLOW, async () => {
    for (const [name, { frame, face }] of Object.entries(subjects)) {
      const widths: number[] = [];
      for (const wide of [-1, 0, 1]) {
        const out = await synth.renderFrame(frame, face, shape(0.2, wide));
        const r = await rigOf({ ...frame, data: out });
        const a = r.landmarks[61]!;
        const b = r.landmarks[291]!;
        widths.push(Math.hypot(a.x - b.x, a.y - b.y));
      }
      expect(widths[1], `${name}: ${widths.join(', ')}`).toBeGreaterThan(widths[0]! + 0.05 * face.mouthWidth);
      expect(widths[2], `${name}: ${widths.join(', ')}`).toBeGreaterThan(widths[1]! + 0.05 * face.mouthWidth);
    }
  });

  it('never writes outside the crop box', async () => {
    for (const { frame, face } of Object.values(subjects)) {
      for (const sh of [shape(1), shape(0.5, 1), shape(0.5, -1, 1)]) {
        const out = await synth.renderFrame(frame, face, sh);
        let changedInside = 0;
        let changedOutside = 0;
        let alphaChanged = 0;
        for (let y = 0; y < frame.height; y++) {
          for (let x = 0; x < frame.width; x++) {
            const c = toCrop(face.box, { x: x + 0.5, y: y + 0.5 });
            const inside = c.x >= 0 && c.x <= 1 && c.y >= 0 && c.y <= 1;
            const i = (y * frame.width + x) * 4;
            const same =
              out[i] === frame.data[i] && out[i + 1] === frame.data[i + 1] && out[i + 2] === frame.data[i + 2];
            if (!inside && !same) changedOutside++;
            else if (!same) changedInside++;
            if (out[i + 3] !== frame.data[i + 3]) alphaChanged++; // alpha stays the frame's
          }
        }
        expect(changedOutside).toBe(0);
        expect(alphaChanged).toBe(0);
        expect(changedInside).toBeGreaterThan(100);
      }
    }
  });

  it('renders a batch exactly as it renders each frame alone', async () => {
    const h = subjects.grace_hopper!;
    const a = subjects.astronaut!;
    const items = [
      { frame: h.frame, face: h.face, shape: shape(0.7) },
      { frame: a.frame, face: a.face, shape: shape(0.3, 0.5) },
      { frame: h.frame, face: h.face, shape: shape(0) },
      { frame: a.frame, face: a.face, shape: shape(0.5, 0, 1) },
      { frame: h.frame, face: h.face, shape: shape(0.2, -0.5, 0.3) },
    ];
    const batch = await synth.renderFrames(items);
    expect(batch).toHaveLength(items.length);
    for (const [i, item] of items.entries()) {
      const single = await synth.renderFrame(item.frame, item.face, item.shape);
      expect(diffStats(batch[i]!, single).max, `item ${i}`).toBeLessThanOrEqual(1);
    }
  });

  it('writes in place when given the frame as target, and refuses a frame of another size', async () => {
    const h = subjects.grace_hopper!;
    const copy = Buffer.from(h.frame.data);
    const expected = await synth.renderFrame(h.frame, h.face, shape(0.5));
    const res = await synth.renderFrame({ ...h.frame, data: copy }, h.face, shape(0.5), copy);
    expect(res).toBe(copy);
    expect(diffStats(copy, expected).max).toBe(0);
    const small = { width: 256, height: 256, data: new Uint8Array(256 * 256 * 4) };
    await expect(synth.renderFrame(small, h.face, shape(0.5))).rejects.toThrow(/prepared on a 512x512 frame/);
    await expect(synth.renderFrame(h.frame, h.face, shape(Number.NaN))).rejects.toThrow(/finite/);
  });

  it(
    'draws on I420 frames in place as it draws on RGBA (then converted), and only inside the crop box',
    SLOW,
    async () => {
      for (const [name, { frame, face }] of Object.entries(subjects)) {
        const source = rgbaToI420(frame.data, frame.width, frame.height);
        const asRgba = i420ToRgba(source, frame.width, frame.height);
        const roundTrip = rgbaToI420(asRgba, frame.width, frame.height);
        const shapes = [shape(0.8), shape(0.4, 0.6), shape(0.5, -0.5, 1), shape(0)];
        const drawn = shapes.map(() => Uint8Array.from(source));
        await synth.renderI420Frames(
          drawn.map((data, i) => ({
            frame: { width: frame.width, height: frame.height, data },
            face,
            shape: shapes[i]!,
          })),
        );
        for (const [i, sh] of shapes.entries()) {
          // Drawn on RGBA and converted back, where that drawing changed anything (the round trip
          // I420 -> RGBA -> I420 alone is off by a level here and there, which is not the drawing's).
          const drawnRgba = rgbaToI420(
            await synth.renderFrame({ ...frame, data: asRgba }, face, sh),
            frame.width,
            frame.height,
          );
          const viaRgba = source.map((v, k) => (drawnRgba[k] !== roundTrip[k] ? drawnRgba[k]! : v));
          const ySize = frame.width * frame.height;
          const changed = diffStats(drawn[i]!.subarray(0, ySize), source.subarray(0, ySize));
          const changedUv = diffStats(drawn[i]!.subarray(ySize), source.subarray(ySize));
          const apart = {
            y: diffStats(drawn[i]!.subarray(0, ySize), viaRgba.subarray(0, ySize)),
            uv: diffStats(drawn[i]!.subarray(ySize), viaRgba.subarray(ySize)),
          };
          const what = `${name} ${JSON.stringify(sh)}: ${JSON.stringify({ changed, changedUv, apart })}`;
          if (sh.open === 0) {
            expect(changed.max, what).toBe(0);
            continue;
          }
          // A clear change, the same picture: only resampling rounding apart (means over the whole frame).
          expect(changed.mean, what).toBeGreaterThan(0.05);
          // (measured: luma at most 4 levels apart, chroma at most 8 at the lips' sharpest edge)
          expect(apart.y.max, what).toBeLessThanOrEqual(4);
          expect(apart.y.mean, what).toBeLessThan(0.01 * changed.mean + 0.005);
          expect(apart.uv.max, what).toBeLessThanOrEqual(12);
          expect(apart.uv.mean, what).toBeLessThan(0.05 * changedUv.mean + 0.005);
          // The rig, run again, measures the same opening either way.
          const [a, b] = await Promise.all([
            rigOf({ ...frame, data: i420ToRgba(drawn[i]!, frame.width, frame.height) }),
            rigOf({ ...frame, data: i420ToRgba(viaRgba, frame.width, frame.height) }),
          ]);
          expect(Math.abs(a.mouthOpenness - b.mouthOpenness), what).toBeLessThan(0.02);
          // Nothing outside the crop box: luma at each pixel centre, chroma at each 2x2 block's.
          let outside = 0;
          for (let y = 0; y < frame.height; y++) {
            for (let x = 0; x < frame.width; x++) {
              const c = toCrop(face.box, { x: x + 0.5, y: y + 0.5 });
              if (
                (c.x < 0 || c.x > 1 || c.y < 0 || c.y > 1) &&
                drawn[i]![y * frame.width + x] !== source[y * frame.width + x]
              )
                outside++;
            }
          }
          const cw = frame.width >> 1;
          for (let y = 0; y < frame.height >> 1; y++) {
            for (let x = 0; x < cw; x++) {
              const c = toCrop(face.box, { x: 2 * x + 1, y: 2 * y + 1 });
              const at = ySize + y * cw + x;
              if (
                (c.x < 0 || c.x > 1 || c.y < 0 || c.y > 1) &&
                (drawn[i]![at] !== source[at] ||
                  drawn[i]![at + cw * (frame.height >> 1)] !== source[at + cw * (frame.height >> 1)])
              )
                outside++;
            }
          }
          expect(outside, what).toBe(0);
        }
      }
      await expect(
        synth.renderI420Frames([
          {
            frame: { width: 512, height: 512, data: new Uint8Array(i420Size(512, 512) - 1) },
            face: subjects.astronaut!.face,
            shape: shape(0.5),
          },
        ]),
      ).rejects.toThrow(/I420 needs/);
    },
  );

  it(
    'reads its crop only inside synthReadRegion: noise everywhere else changes no palette (so only that region is filled)',
    SLOW,
    async () => {
      const session = await ort.InferenceSession.create(MOUTH_PALETTE_MODEL);
      try {
        for (const [name, subject] of Object.entries(subjects)) {
          for (const cropSize of ['auto', 96, 192] as const) {
            const face = prepareFaceForSynth(subject.rig, { cropSize });
            const S = face.cropSize;
            const region = synthReadRegion(face.lips, S);
            expect(
              (region.u1 - region.u0) * (region.v1 - region.v0),
              `${name} S=${S}: the region is a part of the crop`,
            ).toBeLessThan(0.6 * S * S);
            const whole = new Uint8Array(4 * S * S);
            cropToRgba(subject.frame, face.box, S, whole, 0);
            const noisy = new Uint8Array(4 * S * S);
            for (let i = 0; i < noisy.length; i++) noisy[i] = (i * 2654435761) >>> 24;
            cropToRgba(subject.frame, face.box, S, noisy, 0, region);
            const run = (crop: Uint8Array) =>
              session.run({
                crop: new ort.Tensor('uint8', crop, [1, S, S, 4]),
                lips: new ort.Tensor('float32', face.lips, [1, SYNTH_KEYPOINT_COUNT, 2]),
              });
            const [a, b] = [await run(whole), await run(noisy)];
            const bytes = (t: ort.Tensor) => {
              const v = t.data as ArrayBufferView;
              return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
            };
            expect(Buffer.compare(bytes(a.palette!), bytes(b.palette!)), `${name} S=${S}`).toBe(0);
          }
        }
      } finally {
        await session.release();
      }
    },
  );
});

/** Pixels near the mouth that the synthesis made clearly darker than they were (the opening). */
function darkPixelsInMouth(
  out: Uint8Array | Uint8ClampedArray,
  src: Uint8Array | Uint8ClampedArray,
  face: PreparedFace,
): number {
  const { width } = face.imageSize;
  const cx = face.box.cx;
  const r = face.box.size / 2;
  let n = 0;
  for (let y = Math.max(0, Math.floor(face.box.cy - r)); y < Math.min(face.imageSize.height, face.box.cy + r); y++) {
    for (let x = Math.max(0, Math.floor(cx - r)); x < Math.min(width, cx + r); x++) {
      const i = (y * width + x) * 4;
      const [lo, ls] = [luma(out, i), luma(src, i)];
      if (lo < 0.6 * ls && lo < 90) n++;
    }
  }
  return n;
}
