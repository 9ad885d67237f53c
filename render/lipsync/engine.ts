/**
 * One interface over both lip-sync paths, chosen by configuration:
 *
 *   const lipsync = await createLipSync(process.env.LIPSYNC_MODEL);   // or a LipSyncChoice
 *   const face = lipsync.prepare(rigOfThisFrame);
 *   const [rgba] = await lipsync.renderFrames([{ frame, face, shape, mel: melWindow(mel, i, 25) }]);
 *
 * The built-in path uses `shape` (visemes) and ignores `mel`; a neural model
 * uses `mel` and ignores `shape` (`needsAudio` says which). Both crop, run one
 * ONNX session for the whole batch and composite with the same feathered path.
 */
import { existsSync } from 'node:fs';
import * as ort from '../onnx/runtime.ts';
import { chromaAligned, i420RectToRgba, rgbaRectToI420, type PixelRect } from '../encode/frames.ts';
import type { FaceRig } from '../rig/types.ts';
import type { MouthShape } from '../synth/contract.ts';
import { sessionOptions, type ExecutionProvider } from '../onnx/session.ts';
import type { MouthSynth } from '../synth/engine.ts';
import { createMouthSynth } from '../synth/engine.ts';
import type { RgbaFrame } from '../synth/image.ts';
import { checkFrame, compositeFromTensor, cropToTensor } from '../synth/image.ts';
import type { CropBox, PreparedFace } from '../synth/prepare.ts';
import { prepareFaceForSynth } from '../synth/prepare.ts';
import type { LipSyncChoice } from './contract.ts';
import {
  LipSyncModelError,
  NEURAL_FACE_CHANNELS,
  NEURAL_FACE_SIZE,
  NEURAL_MASK_FROM_ROW,
  parseLipSyncChoice,
} from './contract.ts';
import { MEL_BANDS, MEL_WINDOW_FRAMES } from './mel.ts';

export interface NeuralFace {
  kind: 'neural';
  imageSize: { width: number; height: number };
  box: CropBox;
}

export type LipSyncFace = (PreparedFace & { kind: 'builtin' }) | NeuralFace;

export interface LipSyncItem {
  frame: RgbaFrame;
  face: LipSyncFace;
  /** Used by the built-in path. */
  shape: MouthShape;
  /** [80 * 16] mel window (melWindow()), used by a neural model. */
  mel?: Float32Array;
  target?: Uint8Array | Uint8ClampedArray;
}

/**
 * A frame drawn in place as I420 (what a live call publishes). The built-in engine draws on the
 * I420 planes themselves; a neural model's face region is converted to RGBA (into `scratch`), drawn
 * there, and converted back into `i420`. For a lip-sync thread both buffers live on
 * SharedArrayBuffers, so the thread does all of it.
 */
export interface LipSyncI420Item {
  i420: Uint8Array;
  width: number;
  height: number;
  face: LipSyncFace;
  shape: MouthShape;
  mel?: Float32Array;
  /** RGBA, width x height x 4; only the lip-sync region is ever valid. */
  scratch: Uint8Array;
}

export interface LipSyncEngine {
  readonly kind: 'builtin' | 'neural';
  /** True when frames need a mel window (a neural model), false when they need a shape. */
  readonly needsAudio: boolean;
  prepare(rig: FaceRig): LipSyncFace;
  renderFrames(items: readonly LipSyncItem[]): Promise<(Uint8Array | Uint8ClampedArray)[]>;
  /** Draws every item's mouth into its I420 frame, in place (one batch, as renderFrames). */
  renderI420(items: readonly LipSyncI420Item[]): Promise<void>;
  release(): Promise<void>;
}

/** renderI420 over an engine's renderFrames: each item's region out of I420, one batch, and back. */
export async function renderI420InPlace(renderFrames: LipSyncEngine['renderFrames'], items: readonly LipSyncI420Item[]): Promise<void> {
  const regions = items.map((it) => chromaAligned(lipSyncRegion(it.face), it.width, it.height));
  const frames = items.map((it, i): LipSyncItem => {
    i420RectToRgba(it.i420, it.width, it.height, regions[i]!, it.scratch);
    const frame = { data: it.scratch, width: it.width, height: it.height };
    return { frame, face: it.face, shape: it.shape, ...(it.mel ? { mel: it.mel } : {}), target: it.scratch };
  });
  await renderFrames(frames);
  items.forEach((it, i) => rgbaRectToI420(it.scratch, it.width, it.height, regions[i]!, it.i420));
}

/**
 * The pixels of a frame an engine reads or writes for this face: its crop square, turned with the
 * face, and the bilinear taps around it. A frame valid only there renders the same there as the
 * whole frame does, so a caller may convert just this rectangle (e.g. out of I420 and back).
 */
export function lipSyncRegion(face: LipSyncFace): PixelRect {
  const { cx, cy, size, angle } = face.box;
  const half = (size / 2) * (Math.abs(Math.cos(angle)) + Math.abs(Math.sin(angle))) + 2;
  return { x: cx - half, y: cy - half, width: 2 * half, height: 2 * half };
}

/** The face geometry an engine of `kind` needs for frames measured by `rig` (pure arithmetic). */
export function prepareLipSyncFace(kind: LipSyncEngine['kind'], rig: FaceRig): LipSyncFace {
  return kind === 'builtin' ? { ...prepareFaceForSynth(rig), kind: 'builtin' } : prepareFaceForNeural(rig);
}

export interface LipSyncOptions {
  executionProvider?: ExecutionProvider;
  intraOpNumThreads?: number;
}

export async function createLipSync(
  choice: LipSyncChoice | string | undefined,
  options: LipSyncOptions = {},
): Promise<LipSyncEngine> {
  const c = typeof choice === 'object' ? choice : parseLipSyncChoice(choice);
  if (c.kind === 'builtin') return builtinEngine(await createMouthSynth(options));
  return loadNeuralLipSync(c.path, options);
}

function builtinEngine(synth: MouthSynth): LipSyncEngine {
  const renderFrames: LipSyncEngine['renderFrames'] = (items) =>
    synth.renderFrames(
      items.map((it) => {
        if (it.face.kind !== 'builtin') throw new TypeError('this face was prepared for another lip-sync engine');
        return it.target ? { frame: it.frame, face: it.face, shape: it.shape, target: it.target } : { frame: it.frame, face: it.face, shape: it.shape };
      }),
    );
  return {
    kind: 'builtin',
    needsAudio: false,
    prepare: (rig) => prepareLipSyncFace('builtin', rig),
    renderFrames,
    // Drawn on the I420 planes themselves: no region conversion to RGBA and back (scratch unused).
    renderI420: (items) =>
      synth.renderI420Frames(
        items.map((it) => {
          if (it.face.kind !== 'builtin') throw new TypeError('this face was prepared for another lip-sync engine');
          return { frame: { data: it.i420, width: it.width, height: it.height }, face: it.face, shape: it.shape };
        }),
      ),
    release: () => synth.release(),
  };
}

type Meta = ort.InferenceSession.ValueMetadata;

function describe(m: Meta): string {
  return m.isTensor ? `${m.name} ${m.type} [${m.shape.join(',')}]` : `${m.name} (not a tensor)`;
}

function fits(m: Meta, expected: readonly number[]): boolean {
  if (!m.isTensor || m.type !== 'float32') return false;
  const d = m.shape;
  if (d.length !== expected.length + 1) return false;
  if (typeof d[0] === 'number' && d[0] !== 1 && d[0] !== -1) return false; // batch: dynamic or 1
  return expected.every((e, i) => typeof d[i + 1] !== 'number' || d[i + 1] === e || d[i + 1] === -1);
}

/** Load an ONNX model of the neural contract (contract.ts), refusing anything else with a LipSyncModelError. */
export async function loadNeuralLipSync(path: string, options: LipSyncOptions = {}): Promise<LipSyncEngine> {
  if (!existsSync(path)) throw new LipSyncModelError(`lip-sync model not found: ${path}`, path);
  const ep = options.executionProvider ?? 'cpu';
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(path, sessionOptions(ep, options.intraOpNumThreads ?? 1));
  } catch (err) {
    throw new LipSyncModelError(`could not load the lip-sync model ${path}: ${String(err)}`, path, { cause: err });
  }
  const refuse = async (why: string): Promise<never> => {
    await session.release();
    throw new LipSyncModelError(
      `${path} does not follow the lip-sync model contract (mel [N,1,80,16] + face [N,6,96,96] -> [N,3,96,96], float32): ${why}`,
      path,
    );
  };
  const ins = session.inputMetadata;
  const outs = session.outputMetadata;
  if (ins.length !== 2) await refuse(`it has ${ins.length} inputs (${ins.map(describe).join('; ')}), not 2`);
  if (outs.length !== 1) await refuse(`it has ${outs.length} outputs (${outs.map(describe).join('; ')}), not 1`);
  const melIn = ins.find((m) => fits(m, [1, MEL_BANDS, MEL_WINDOW_FRAMES]));
  const faceIn = ins.find((m) => fits(m, [NEURAL_FACE_CHANNELS, NEURAL_FACE_SIZE, NEURAL_FACE_SIZE]));
  if (!melIn || !faceIn || melIn === faceIn) await refuse(`its inputs are ${ins.map(describe).join('; ')}`);
  if (!fits(outs[0]!, [3, NEURAL_FACE_SIZE, NEURAL_FACE_SIZE])) await refuse(`its output is ${describe(outs[0]!)}`);
  // Symbolic dimensions say little: one probe run checks the real output shape and range.
  const probe = await runNeural(session, melIn!.name, faceIn!.name, new Float32Array(MEL_BANDS * MEL_WINDOW_FRAMES).fill(-4), new Float32Array(6 * NEURAL_FACE_SIZE ** 2).fill(0.5), 1).catch(
    (err: unknown) => refuse(`a probe run failed: ${String(err)}`),
  );
  const want = [1, 3, NEURAL_FACE_SIZE, NEURAL_FACE_SIZE];
  if (probe.dims.length !== 4 || probe.dims.some((d, i) => d !== want[i])) {
    await refuse(`a probe run returned [${probe.dims.join(',')}] instead of [${want.join(',')}]`);
  }
  return neuralEngine(session, melIn!.name, faceIn!.name);
}

async function runNeural(
  session: ort.InferenceSession,
  melName: string,
  faceName: string,
  mel: Float32Array,
  face: Float32Array,
  n: number,
): Promise<ort.Tensor> {
  const res = await session.run({
    [melName]: new ort.Tensor('float32', mel, [n, 1, MEL_BANDS, MEL_WINDOW_FRAMES]),
    [faceName]: new ort.Tensor('float32', face, [n, NEURAL_FACE_CHANNELS, NEURAL_FACE_SIZE, NEURAL_FACE_SIZE]),
  });
  return Object.values(res)[0]!;
}

/** Square face crop for the neural model: the rig's face box, rotated with the eyes. */
export function prepareFaceForNeural(rig: FaceRig): NeuralFace {
  const { box } = rig;
  const r = rig.eyes.right.center;
  const l = rig.eyes.left.center;
  const [p, q] = r.x <= l.x ? [r, l] : [l, r];
  const angle = Math.atan2(q.y - p.y, q.x - p.x);
  const size = Math.max(box.width, box.height);
  return { kind: 'neural', imageSize: { ...rig.imageSize }, box: { cx: box.x + box.width / 2, cy: box.y + box.height / 2, size, angle } };
}

/** Where the neural output replaces the frame: the lower face, fading in over the masked half's top rows. */
function lowerFaceMask(S: number): Float32Array {
  const m = new Float32Array(S * S);
  const v0 = (NEURAL_MASK_FROM_ROW - 6) / S;
  const v1 = (NEURAL_MASK_FROM_ROW + 4) / S;
  for (let v = 0; v < S; v++) {
    const t = Math.min(1, Math.max(0, ((v + 0.5) / S - v0) / (v1 - v0)));
    m.fill(t * t * (3 - 2 * t), v * S, (v + 1) * S);
  }
  return m;
}

function neuralEngine(session: ort.InferenceSession, melName: string, faceName: string): LipSyncEngine {
  const S = NEURAL_FACE_SIZE;
  const plane = S * S;
  const mask = lowerFaceMask(S);
  const renderFrames: LipSyncEngine['renderFrames'] = async (items) => {
    const results: (Uint8Array | Uint8ClampedArray)[] = [];
    items.forEach((it, i) => {
      checkFrame(it.frame);
      if (it.face.kind !== 'neural') throw new TypeError('this face was prepared for another lip-sync engine');
      const { width, height } = it.face.imageSize;
      if (width !== it.frame.width || height !== it.frame.height) {
        throw new RangeError(`item ${i}: the face was prepared on a ${width}x${height} frame but the frame is ${it.frame.width}x${it.frame.height}`);
      }
      if (!it.mel || it.mel.length !== MEL_BANDS * MEL_WINDOW_FRAMES) {
        throw new RangeError(`item ${i}: a neural lip-sync model needs a mel window of ${MEL_BANDS}x${MEL_WINDOW_FRAMES} (melWindow())`);
      }
      const target = it.target ?? new Uint8Array(it.frame.data.length);
      if (target !== it.frame.data) target.set(it.frame.data);
      results.push(target);
    });
    const N = items.length;
    if (N === 0) return results;
    const face = new Float32Array(N * 6 * plane);
    const mel = new Float32Array(N * MEL_BANDS * MEL_WINDOW_FRAMES);
    const rgb = new Float32Array(3 * plane);
    items.forEach((it, n) => {
      cropToTensor(it.frame, (it.face as NeuralFace).box, S, rgb, 0);
      const base = n * 6 * plane;
      for (let ch = 0; ch < 3; ch++) {
        const src = rgb.subarray((2 - ch) * plane, (3 - ch) * plane); // RGB -> BGR
        face.set(src, base + (3 + ch) * plane); // reference
        face.set(src.subarray(0, NEURAL_MASK_FROM_ROW * S), base + ch * plane); // target, lower half left at 0
      }
      mel.set(it.mel!, n * MEL_BANDS * MEL_WINDOW_FRAMES);
    });
    const out = await runNeural(session, melName, faceName, mel, face, N);
    const bgr = out.data as Float32Array;
    const back = new Float32Array(3 * plane);
    items.forEach((it, n) => {
      const o = n * 3 * plane;
      for (let ch = 0; ch < 3; ch++) back.set(bgr.subarray(o + (2 - ch) * plane, o + (3 - ch) * plane), ch * plane);
      compositeFromTensor(it.frame, results[n]!, (it.face as NeuralFace).box, S, back, 0, mask, 0);
    });
    return results;
  };
  return {
    kind: 'neural',
    needsAudio: true,
    prepare: prepareFaceForNeural,
    renderFrames,
    renderI420: (items) => renderI420InPlace(renderFrames, items),
    release: () => session.release(),
  };
}

