/**
 * Speed of the built-in mouth synthesis on 512x512 frames (a fixture portrait
 * fitted so the face fills about half the frame): crop + graph + composite,
 * one intra-op thread, single frames and batches, beside a sharp JPEG encode
 * of the same frame in the same run (a yardstick that moves with the machine):
 *
 *   npx tsx render/synth/bench.ts [seconds]
 *
 * `benchSynth` is what the project's `npm run bench` calls. Not a timed test.
 */
import { fileURLToPath } from 'node:url';
import * as ort from '../onnx/runtime.ts';
import sharp from 'sharp';
import { detectFaceRig } from '../rig/index.ts';
import { MOUTH_SHAPE_KEYS, SYNTH_KEYPOINT_COUNT, synthReadRegion } from './contract.ts';
import { sessionOptions } from '../onnx/session.ts';
import { createMouthSynth, MOUTH_PALETTE_MODEL, MOUTH_SYNTH_MODEL, warpLayers } from './engine.ts';
import type { SynthItem } from './engine.ts';
import { portraitFrame } from './examples/make-stills.ts';
import { compositeWarp, cropToRgba } from './image.ts';
import type { PreparedFace } from './prepare.ts';
import { autoCropSize, prepareFaceForSynth } from './prepare.ts';

interface SynthBenchCase {
  /** Crop edge S fed to the graph. */
  cropSize: number;
  /** ms per frame on one core, everything (crop + graph + composite), by batch size. */
  msPerFrame: Record<string, number>;
  /**
   * Single frame, by stage: the palette (the crop filled and the palette graph run: once per
   * prepared face, then kept), the synthesis graph run, the TypeScript composite.
   */
  stages: { palette: number; graph: number; composite: number };
}

export interface SynthBenchFigures {
  frameSize: 512;
  /** Crop box side in frame pixels for this portrait. */
  cropBoxPx: number;
  threads: 1;
  /** 'auto' crop size (3/4 of the crop box) and S equal to the crop box (one crop pixel per frame pixel). */
  cases: SynthBenchCase[];
  /** ms per 512x512 JPEG encode (sharp, quality 80, one libvips thread) in the same run. */
  msJpegEncode: number;
  /** The design target: synthesis at most 2 ms per frame per core. */
  targetMs: 2;
}

/**
 * ms per call (divided by perCall): the best of ROUNDS rounds, each the mean over
 * seconds/ROUNDS. On a shared machine other jobs only ever add time, so the best
 * round is the figure least disturbed by them.
 */
const ROUNDS = 5;
async function timeIt(seconds: number, fn: () => Promise<void> | void, perCall = 1): Promise<number> {
  for (let i = 0; i < 3; i++) await fn(); // warm up
  let best = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    let n = 0;
    const t0 = performance.now();
    const until = t0 + (seconds * 1000) / ROUNDS;
    while (performance.now() < until || n < 2) {
      await fn();
      n++;
    }
    best = Math.min(best, (performance.now() - t0) / (n * perCall));
  }
  return best;
}

async function stageTimes(
  frame: { data: Buffer; width: number; height: number },
  face: PreparedFace,
  seconds: number,
): Promise<SynthBenchCase['stages']> {
  const S = face.cropSize;
  const [palette, synth] = await Promise.all(
    [MOUTH_PALETTE_MODEL, MOUTH_SYNTH_MODEL].map((m) => ort.InferenceSession.create(m, sessionOptions('cpu', 1))),
  );
  try {
    const crop = new Uint8Array(4 * S * S);
    const lips = new ort.Tensor('float32', face.lips, [1, SYNTH_KEYPOINT_COUNT, 2]);
    let measured = await palette!.run({ crop: new ort.Tensor('uint8', crop, [1, S, S, 4]), lips });
    const paletteMs = await timeIt(seconds / 3, async () => {
      cropToRgba(frame, face.box, S, crop, 0, synthReadRegion(face.lips, S));
      measured = await palette!.run({ crop: new ort.Tensor('uint8', crop, [1, S, S, 4]), lips });
    });
    const feeds = {
      lips,
      shape: new ort.Tensor('float32', Float32Array.of(0.6, 0, 0, 0, 0, 1), [1, MOUTH_SHAPE_KEYS.length]),
      palette: measured.palette!,
      size: new ort.Tensor('int64', BigInt64Array.of(BigInt(S)), [1]),
    };
    let res = await synth!.run(feeds);
    const graphMs = await timeIt(seconds / 3, async () => {
      res = await synth!.run(feeds);
    });
    const layers = warpLayers(res, S);
    const target = new Uint8Array(frame.data.length);
    const compositeMs = await timeIt(seconds / 3, () => compositeWarp(frame, target, face.box, S, layers));
    return { palette: paletteMs, graph: graphMs, composite: compositeMs };
  } finally {
    await palette!.release();
    await synth!.release();
  }
}

export async function benchSynth(options: { seconds?: number; batches?: number[] } = {}): Promise<SynthBenchFigures> {
  const seconds = options.seconds ?? 2;
  const batches = options.batches ?? [1, 8, 32];
  const frame = await portraitFrame('grace_hopper');
  const raw = { raw: { width: 512, height: 512, channels: 4 as const } };
  const rig = await detectFaceRig(await sharp(frame.data, raw).png().toBuffer());
  const cases: SynthBenchCase[] = [];
  const synth = await createMouthSynth({ executionProvider: 'cpu', intraOpNumThreads: 1 });
  try {
    // 'auto' and the crop box's own size (every crop pixel one frame pixel)
    for (const cropSize of ['auto', autoCropSize(prepareFaceForSynth(rig).box.size, 1)] as const) {
      const face = prepareFaceForSynth(rig, { cropSize });
      const msPerFrame: Record<string, number> = {};
      let k = 0;
      for (const n of batches) {
        const items: SynthItem[] = Array.from({ length: n }, (_, i) => ({
          frame,
          face,
          shape: { open: 0.2 + 0.15 * (i % 5), wide: 0, round: 0 },
          target: new Uint8Array(frame.data.length),
        }));
        msPerFrame[String(n)] = await timeIt(
          seconds,
          async () => {
            items[0]!.shape = { open: 0.3 + 0.1 * (k++ % 6), wide: 0, round: 0 }; // speech varies frame to frame
            await synth.renderFrames(items);
          },
          n,
        );
      }
      cases.push({ cropSize: face.cropSize, msPerFrame, stages: await stageTimes(frame, face, seconds) });
    }
  } finally {
    await synth.release();
  }

  const prevConcurrency = sharp.concurrency();
  sharp.concurrency(1);
  const msJpegEncode = await timeIt(seconds / 2, async () => {
    await sharp(frame.data, raw).jpeg({ quality: 80 }).toBuffer();
  });
  sharp.concurrency(prevConcurrency);

  return {
    frameSize: 512,
    cropBoxPx: prepareFaceForSynth(rig).box.size,
    threads: 1,
    cases,
    msJpegEncode,
    targetMs: 2,
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const seconds = Number(process.argv[2] ?? 2);
  process.stdout.write(`${JSON.stringify(await benchSynth({ seconds }), null, 2)}\n`);
}
