/**
 * The built-in lip-sync renderer: crop the mouth region of a frame, run the
 * mouth synthesis graph (onnxruntime-node, CPU or CUDA), composite back.
 *
 *   const synth = await createMouthSynth();
 *   const face = prepareFaceForSynth(rigOfThisFrame);
 *   const rgba = await synth.renderFrame(frame, face, { open: 0.6, wide: 0, round: 0 });
 *
 * `renderFrames` runs many sessions' frames in one graph call (the GPU path).
 */
import { fileURLToPath } from 'node:url';
import * as ort from '../onnx/runtime.ts';
import type { MouthShape } from './contract.ts';
import { MOUTH_SHAPE_KEYS, SYNTH_INPUTS, SYNTH_KEYPOINT_COUNT, SYNTH_OUTPUTS, synthReadRegion, type CropRegion } from './contract.ts';
import type { I420Frame, RgbaFrame, WarpLayers } from './image.ts';
import { checkFrame, checkI420Frame, compositeWarp, compositeWarpI420, cropI420ToRgba, cropToRgba } from './image.ts';
import type { PreparedFace } from './prepare.ts';
import { sessionOptions, type ExecutionProvider } from '../onnx/session.ts';

export const MOUTH_SYNTH_MODEL = fileURLToPath(new URL('../models/synth/mouth_synth.onnx', import.meta.url));

export type { ExecutionProvider } from '../onnx/session.ts';

export interface MouthSynthOptions {
  /** Default 'cpu'. 'cuda' needs onnxruntime-node installed with its CUDA provider. */
  executionProvider?: ExecutionProvider;
  /** Threads for one graph run; default 1 (many sessions share the cores, one run each). */
  intraOpNumThreads?: number;
  /** Another graph of the same contract (tests, experiments). */
  modelPath?: string;
}

/** One frame to render: the frame, its prepared face, the mouth shape, and where to write. */
export interface SynthItem {
  frame: RgbaFrame;
  face: PreparedFace;
  shape: MouthShape;
  /** Written in place when given (may be frame.data); otherwise a new buffer is returned. */
  target?: Uint8Array | Uint8ClampedArray;
}

/** One I420 frame whose mouth is drawn in place (a live call's frame): no conversion to RGBA and back. */
export interface SynthI420Item {
  frame: I420Frame;
  face: PreparedFace;
  shape: MouthShape;
}

export interface MouthSynth {
  readonly executionProvider: ExecutionProvider;
  /** RGBA of the frame with the mouth in `shape`. Shape (0,0,0) returns the frame's pixels unchanged. */
  renderFrame(
    frame: RgbaFrame,
    face: PreparedFace,
    shape: MouthShape,
    target?: Uint8Array | Uint8ClampedArray,
  ): Promise<Uint8Array | Uint8ClampedArray>;
  /** The same for many frames (e.g. one per live session): one graph run per distinct crop size in the batch. */
  renderFrames(items: readonly SynthItem[]): Promise<(Uint8Array | Uint8ClampedArray)[]>;
  /** Draws each item's mouth into its I420 frame in place; batched as renderFrames. */
  renderI420Frames(items: readonly SynthI420Item[]): Promise<void>;
  release(): Promise<void>;
}

/** How one batch item is read into the crop tensor and how the graph's layers go back into it (RGBA or I420). */
interface Canvas {
  face: PreparedFace;
  shape: MouthShape;
  /** Fills `region` of the item's crop (the graph reads no other pixel of it). */
  crop(S: number, dst: Uint8Array, offset: number, region: CropRegion): void;
  composite(S: number, layers: WarpLayers): void;
}

/** A shape this close to neutral does not move any pixel visibly; it skips the graph. */
const NEUTRAL_EPS = 1e-4;

/** True when every parameter of the shape is within `tolerance` of rest. */
export function isNeutral(shape: MouthShape, tolerance = NEUTRAL_EPS): boolean {
  return MOUTH_SHAPE_KEYS.every((k) => Math.abs(shape[k] ?? 0) < tolerance);
}

export async function createMouthSynth(options: MouthSynthOptions = {}): Promise<MouthSynth> {
  const ep = options.executionProvider ?? 'cpu';
  if (ep !== 'cpu' && ep !== 'cuda') throw new RangeError(`executionProvider must be 'cpu' or 'cuda', got ${String(ep)}`);
  const path = options.modelPath ?? MOUTH_SYNTH_MODEL;
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(path, sessionOptions(ep, options.intraOpNumThreads ?? 1));
  } catch (err) {
    const hint =
      ep === 'cuda'
        ? ' (the CUDA provider needs onnxruntime-node installed with ONNXRUNTIME_NODE_INSTALL=cuda12 and a CUDA 12 driver)'
        : '';
    throw new Error(`could not load the mouth synthesis model ${path} on ${ep}${hint}: ${String(err)}`, { cause: err });
  }
  for (const name of Object.values(SYNTH_INPUTS)) {
    if (!session.inputNames.includes(name)) throw new Error(`${path} is not a mouth synthesis graph: no input "${name}"`);
  }
  for (const name of Object.values(SYNTH_OUTPUTS)) {
    if (!session.outputNames.includes(name)) throw new Error(`${path} is not a mouth synthesis graph: no output "${name}"`);
  }
  const shapeKeys = graphShapeKeys(session);
  if (shapeKeys.length !== 3 && shapeKeys.length !== MOUTH_SHAPE_KEYS.length) {
    throw new Error(`${path} is not a mouth synthesis graph: its shape input has ${shapeKeys.length} parameters, not ${MOUTH_SHAPE_KEYS.length}`);
  }

  /** One graph run per crop size (faces of similar size share one); neutral shapes skip it. */
  const drawAll = async (canvases: readonly Canvas[]): Promise<void> => {
    const groups = new Map<number, Canvas[]>();
    for (const canvas of canvases) {
      if (isNeutral(canvas.shape)) continue;
      const group = groups.get(canvas.face.cropSize);
      if (group) group.push(canvas);
      else groups.set(canvas.face.cropSize, [canvas]);
    }
    for (const [S, group] of groups) await runGroup(S, group);
  };

  const checkItem = (i: number, face: PreparedFace, shape: MouthShape, width: number, height: number): void => {
    if (face.imageSize.width !== width || face.imageSize.height !== height) {
      throw new RangeError(`item ${i}: the face was prepared on a ${face.imageSize.width}x${face.imageSize.height} frame but the frame is ${width}x${height}`);
    }
    checkShape(shape, i);
  };

  const renderFrames = async (items: readonly SynthItem[]): Promise<(Uint8Array | Uint8ClampedArray)[]> => {
    const results = items.map((item, i) => {
      checkFrame(item.frame);
      checkItem(i, item.face, item.shape, item.frame.width, item.frame.height);
      const target = item.target ?? new Uint8Array(item.frame.data.length);
      if (target.length !== item.frame.data.length) throw new RangeError(`item ${i}: target has the wrong size`);
      if (target !== item.frame.data) target.set(item.frame.data);
      return target;
    });
    await drawAll(
      items.map(({ frame, face, shape }, i) => ({
        face,
        shape,
        crop: (S, dst, offset, region) => cropToRgba(frame, face.box, S, dst, offset, region),
        composite: (S, layers) => compositeWarp(frame, results[i]!, face.box, S, layers),
      })),
    );
    return results;
  };

  const renderI420Frames = async (items: readonly SynthI420Item[]): Promise<void> => {
    items.forEach((item, i) => {
      checkI420Frame(item.frame);
      checkItem(i, item.face, item.shape, item.frame.width, item.frame.height);
    });
    await drawAll(
      items.map(({ frame, face, shape }) => ({
        face,
        shape,
        crop: (S, dst, offset, region) => cropI420ToRgba(frame, face.box, S, dst, offset, region),
        composite: (S, layers) => compositeWarpI420(frame, face.box, S, layers),
      })),
    );
  };

  const runGroup = async (S: number, group: readonly Canvas[]): Promise<void> => {
    const N = group.length;
    const plane = S * S;
    const crop = new Uint8Array(N * 4 * plane);
    const lips = new Float32Array(N * SYNTH_KEYPOINT_COUNT * 2);
    const shape = new Float32Array(N * shapeKeys.length);
    group.forEach((canvas, n) => {
      canvas.crop(S, crop, n * 4 * plane, synthReadRegion(canvas.face.lips, S));
      lips.set(canvas.face.lips, n * SYNTH_KEYPOINT_COUNT * 2);
      shapeKeys.forEach((k, j) => (shape[n * shapeKeys.length + j] = canvas.shape[k] ?? 0));
    });
    const res = await session.run({
      [SYNTH_INPUTS.crop]: new ort.Tensor('uint8', crop, [N, S, S, 4]),
      [SYNTH_INPUTS.lips]: new ort.Tensor('float32', lips, [N, SYNTH_KEYPOINT_COUNT, 2]),
      [SYNTH_INPUTS.shape]: new ort.Tensor('float32', shape, [N, shapeKeys.length]),
    });
    const layers = warpLayers(res, S);
    group.forEach((canvas, n) => {
      layers.warpOffset = n * 2 * layers.w * layers.w;
      layers.innerOffset = n * 4 * layers.ih * layers.iw;
      canvas.composite(S, layers);
    });
  };

  return {
    executionProvider: ep,
    renderFrames,
    renderI420Frames,
    async renderFrame(frame, face, shape, target) {
      const [rgba] = await renderFrames([target ? { frame, face, shape, target } : { frame, face, shape }]);
      return rgba!;
    },
    release: () => session.release(),
  };
}

/**
 * The shape parameters a graph takes, in order: all of MOUTH_SHAPE_KEYS, or the first three for a graph
 * of the first contract (benchmarks and the gallery run the previous graph beside this one).
 */
export function graphShapeKeys(session: ort.InferenceSession): readonly (typeof MOUTH_SHAPE_KEYS)[number][] {
  const meta = session.inputMetadata.find((m) => m.name === SYNTH_INPUTS.shape);
  const width = meta?.isTensor && typeof meta.shape[1] === 'number' ? meta.shape[1] : MOUTH_SHAPE_KEYS.length;
  return MOUTH_SHAPE_KEYS.slice(0, width);
}

/** A graph run's outputs as the composite reads them (the first frame's; offsets select another). */
export function warpLayers(res: ort.InferenceSession.ReturnType, S: number): WarpLayers {
  const warp = res[SYNTH_OUTPUTS.warp]!;
  const inner = res[SYNTH_OUTPUTS.inner]!;
  const at = res[SYNTH_OUTPUTS.innerAt]!.data as BigInt64Array;
  const w = warp.dims[3]!;
  return {
    warp: warp.data as Float32Array,
    warpOffset: 0,
    w,
    warpAt: (S - w) / 2,
    inner: inner.data as Float32Array,
    innerOffset: 0,
    ih: inner.dims[2]!,
    iw: inner.dims[3]!,
    innerRow: Number(at[0]),
    innerCol: Number(at[1]),
  };
}

function checkShape(shape: MouthShape, i: number): void {
  for (const k of MOUTH_SHAPE_KEYS) {
    if (!Number.isFinite(shape[k] ?? 0)) throw new RangeError(`item ${i}: shape.${k} must be a finite number`);
  }
}
