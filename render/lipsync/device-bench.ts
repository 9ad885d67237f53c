/**
 * The lip-sync engines by device: a live call's frames (I420, drawn in place, as the worker
 * publishes them) per batch size on the CPU and on CUDA, the built-in synthesis graph's run alone
 * (what a GPU does of a frame), and whether the two devices draw the same pixels.
 *
 *   RENDER_DEVICE=cuda npm run bench -- render     (section "lipSyncByDevice"; CPU only without it)
 *
 * Imports nothing but the render engines and ONNX Runtime, so it runs where the rest of the
 * project is not installed (a GPU host with Node and onnxruntime-node alone). Not a timed test.
 */
import * as ort from '../onnx/runtime.ts';
import type { ExecutionProvider } from '../onnx/session.ts';
import { sessionOptions } from '../onnx/session.ts';
import type { FaceRig } from '../rig/types.ts';
import { GALLERY_SOUNDS, speakingShape } from '../synth/compare.ts';
import {
  MOUTH_SHAPE_KEYS,
  PALETTE_INPUTS,
  SYNTH_INPUTS,
  SYNTH_KEYPOINT_COUNT,
  type MouthShape,
} from '../synth/contract.ts';
import { MOUTH_PALETTE_MODEL, MOUTH_SYNTH_MODEL } from '../synth/engine.ts';
import { prepareFaceForSynth } from '../synth/prepare.ts';
import { createLipSync } from './engine.ts';
import type { LipSyncEngine, LipSyncI420Item } from './engine.ts';
import { melSpectrogram, melWindow } from './mel.ts';

export interface DeviceBenchInput {
  /** One frame, I420, and the rig of its face. */
  i420: Uint8Array;
  width: number;
  height: number;
  rig: FaceRig;
}

export interface DeviceBenchOptions {
  /** Engines by name: `builtin` or the path of a Wav2Lip-class model (LIPSYNC_MODEL's values). */
  engines: Record<string, string>;
  devices: ExecutionProvider[];
  batches: number[];
  /** Seconds per figure. */
  seconds: number;
  /** Intra-op threads of each session (1: the worker's per-thread setting). */
  threads: number;
}

interface DeviceBenchRow {
  engine: string;
  device: ExecutionProvider;
  batch: number;
  /** Everything the worker does to a live frame's mouth (crop, graphs, composite), ms per frame, one JS thread. */
  msPerFrame: number;
  /** The built-in synthesis graph's run alone, ms per frame (built-in engine only). */
  graphMsPerFrame?: number;
}

export interface DeviceBenchFigures {
  rows: DeviceBenchRow[];
  /** Per engine, CUDA's frame against the CPU's from the same source: largest byte difference and bytes off by more than 2. */
  agreement: { engine: string; maxDiff: number; bytesOver2: number; bytes: number }[];
}

export async function msPer(fn: () => Promise<unknown>, seconds: number, perCall: number): Promise<number> {
  for (let i = 0; i < 3; i++) await fn();
  let best = Infinity;
  for (let round = 0; round < 3; round++) {
    let n = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < (seconds * 1000) / 3 || n < 2) {
      await fn();
      n++;
    }
    best = Math.min(best, (performance.now() - t0) / n / perCall);
  }
  return best;
}

/** n live frames of the face, the mouth opening and closing (or in the given shapes, one frame each). */
function liveItems(
  input: DeviceBenchInput,
  engine: LipSyncEngine,
  n: number,
  shapes?: readonly MouthShape[],
): LipSyncI420Item[] {
  const face = engine.prepare(input.rig);
  const speech = new Float32Array(16000 * 2).map((_, i) => Math.sin(i / 7) * 0.3 * Math.sin(i / 4000));
  const mel = melSpectrogram(speech);
  return Array.from({ length: n }, (_, i) => ({
    i420: input.i420.slice(),
    width: input.width,
    height: input.height,
    face,
    shape: shapes?.[i] ?? { open: 0.2 + 0.12 * (i % 6), wide: 0.1, round: 0 },
    mel: melWindow(mel, i % 40, 25),
  }));
}

/** The synthesis graph's run alone for a batch of n of this face (the palette measured once, kept, as the engine does). */
async function synthGraphMsPerFrame(input: DeviceBenchInput, device: ExecutionProvider, options: DeviceBenchOptions) {
  const face = prepareFaceForSynth(input.rig);
  const S = face.cropSize;
  const [palette, synth] = await Promise.all(
    [MOUTH_PALETTE_MODEL, MOUTH_SYNTH_MODEL].map((m) =>
      ort.InferenceSession.create(m, sessionOptions(device, options.threads)),
    ),
  );
  try {
    const out: Record<number, number> = {};
    for (const n of options.batches) {
      const lips = new Float32Array(n * SYNTH_KEYPOINT_COUNT * 2);
      for (let i = 0; i < n; i++) lips.set(face.lips, i * face.lips.length);
      const lipsTensor = new ort.Tensor('float32', lips, [n, SYNTH_KEYPOINT_COUNT, 2]);
      const crop = new ort.Tensor('uint8', new Uint8Array(n * S * S * 4).fill(128), [n, S, S, 4]);
      const measured = await palette!.run({ [PALETTE_INPUTS.crop]: crop, [PALETTE_INPUTS.lips]: lipsTensor });
      const shape = new Float32Array(n * MOUTH_SHAPE_KEYS.length).map((_, i) => (i % 6 === 0 ? 0.5 : 0.05));
      const feeds = {
        [SYNTH_INPUTS.lips]: lipsTensor,
        [SYNTH_INPUTS.shape]: new ort.Tensor('float32', shape, [n, MOUTH_SHAPE_KEYS.length]),
        [SYNTH_INPUTS.palette]: measured.palette!,
        [SYNTH_INPUTS.size]: new ort.Tensor('int64', BigInt64Array.of(BigInt(S)), [1]),
      };
      out[n] = await msPer(() => synth!.run(feeds), options.seconds, n);
    }
    return out;
  } finally {
    await palette!.release();
    await synth!.release();
  }
}

export async function benchLipSyncByDevice(
  input: DeviceBenchInput,
  options: DeviceBenchOptions,
): Promise<DeviceBenchFigures> {
  const rows: DeviceBenchRow[] = [];
  const agreement: DeviceBenchFigures['agreement'] = [];
  for (const [name, choice] of Object.entries(options.engines)) {
    const drawn: Uint8Array[] = [];
    for (const device of options.devices) {
      const engine = await createLipSync(choice, { executionProvider: device, intraOpNumThreads: options.threads });
      try {
        // Every sound of the gallery, so each part of the graph (teeth, tongue, press, tuck, round) is compared.
        const sounds = GALLERY_SOUNDS.map((s) => speakingShape(s.viseme));
        const check = liveItems(input, engine, sounds.length, sounds);
        await engine.renderI420(check);
        drawn.push(Buffer.concat(check.map((it) => it.i420)));
        const graph = engine.kind === 'builtin' ? await synthGraphMsPerFrame(input, device, options) : undefined;
        for (const batch of options.batches) {
          const items = liveItems(input, engine, batch);
          const msPerFrame = await msPer(
            async () => {
              for (const it of items) it.i420.set(input.i420);
              await engine.renderI420(items);
            },
            options.seconds,
            batch,
          );
          rows.push({ engine: name, device, batch, msPerFrame, ...(graph ? { graphMsPerFrame: graph[batch] } : {}) });
        }
      } finally {
        await engine.release();
      }
    }
    if (drawn.length === 2) {
      const [a, b] = drawn as [Uint8Array, Uint8Array];
      let maxDiff = 0;
      let bytesOver2 = 0;
      for (let i = 0; i < a.length; i++) {
        const d = Math.abs(a[i]! - b[i]!);
        if (d > maxDiff) maxDiff = d;
        if (d > 2) bytesOver2++;
      }
      agreement.push({ engine: name, maxDiff, bytesOver2, bytes: a.length });
    }
  }
  return { rows, agreement };
}
