/**
 * The built-in lip-sync renderer: the mouth graphs (onnxruntime-node, CPU or CUDA) and the
 * composite back into the frame. The palette graph measures what the mouth needs of a frame's
 * pixels once per prepared face (kept in a cache keyed by the face's geometry, so a clip's frames
 * are measured the first time each is drawn); the synthesis graph draws every frame from it.
 *
 *   const synth = await createMouthSynth();
 *   const face = prepareFaceForSynth(rigOfThisFrame);
 *   const rgba = await synth.renderFrame(frame, face, { open: 0.6, wide: 0, round: 0 });
 *
 * `renderFrames` runs many sessions' frames in one graph call (the GPU path).
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ort from '../onnx/runtime.ts';
import type { MouthShape } from './contract.ts';
import {
  LEGACY_CROP_INPUT,
  MOUTH_SHAPE_KEYS,
  PALETTE_INPUTS,
  PALETTE_OUTPUT,
  SYNTH_INPUTS,
  SYNTH_KEYPOINT_COUNT,
  SYNTH_OUTPUTS,
  synthReadRegion,
  type CropRegion,
} from './contract.ts';
import type { I420Frame, RgbaFrame, WarpLayers } from './image.ts';
import { checkFrame, checkI420Frame, compositeWarp, compositeWarpI420, cropI420ToRgba, cropToRgba } from './image.ts';
import type { PreparedFace } from './prepare.ts';
import { sessionOptions, type ExecutionProvider } from '../onnx/session.ts';

export const MOUTH_SYNTH_MODEL = fileURLToPath(new URL('../models/synth/mouth_synth.onnx', import.meta.url));
export const MOUTH_PALETTE_MODEL = fileURLToPath(new URL('../models/synth/mouth_palette.onnx', import.meta.url));

export interface MouthSynthOptions {
  /** Default 'cpu'. 'cuda' needs onnxruntime-node installed with its CUDA provider. */
  executionProvider?: ExecutionProvider;
  /** Threads for one graph run; default 1 (many sessions share the cores, one run each). */
  intraOpNumThreads?: number;
  /**
   * Another synthesis graph (tests, experiments, the previous graph for comparisons). Its palette
   * graph is the `mouth_palette.onnx` beside it when there is one, else the shipped one; a graph of
   * the first contract (a crop input, three shape parameters) needs none.
   */
  modelPath?: string;
  /** Palettes kept (one per distinct prepared face); default 8192, about 200 bytes each. */
  paletteCacheSize?: number;
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
interface SynthI420Item {
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
  /** The graph's layers for one frame, as the composite reads them (measures, tests); null at rest. */
  layers(frame: RgbaFrame, face: PreparedFace, shape: MouthShape): Promise<{ S: number; layers: WarpLayers } | null>;
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
  if (ep !== 'cpu' && ep !== 'cuda')
    throw new RangeError(`executionProvider must be 'cpu' or 'cuda', got ${String(ep)}`);
  const path = options.modelPath ?? MOUTH_SYNTH_MODEL;
  const session = await loadGraph(path, ep, options.intraOpNumThreads ?? 1);
  const legacy = session.inputNames.includes(LEGACY_CROP_INPUT);
  for (const name of Object.values(SYNTH_INPUTS)) {
    if (legacy && (name === SYNTH_INPUTS.palette || name === SYNTH_INPUTS.size)) continue;
    if (!session.inputNames.includes(name))
      throw new Error(`${path} is not a mouth synthesis graph: no input "${name}"`);
  }
  for (const name of Object.values(SYNTH_OUTPUTS)) {
    if (!session.outputNames.includes(name))
      throw new Error(`${path} is not a mouth synthesis graph: no output "${name}"`);
  }
  const shapeKeys = graphShapeKeys(session);
  if (shapeKeys.length !== (legacy ? 3 : MOUTH_SHAPE_KEYS.length)) {
    throw new Error(
      `${path} is not a mouth synthesis graph: its shape input has ${shapeKeys.length} parameters, not ${MOUTH_SHAPE_KEYS.length}`,
    );
  }
  let palettes: PaletteCache | undefined;
  if (!legacy) {
    const beside = join(dirname(path), 'mouth_palette.onnx');
    const palettePath = options.modelPath && existsSync(beside) ? beside : MOUTH_PALETTE_MODEL;
    palettes = new PaletteCache(
      await loadGraph(palettePath, ep, options.intraOpNumThreads ?? 1),
      options.paletteCacheSize ?? 8192,
    );
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
      throw new RangeError(
        `item ${i}: the face was prepared on a ${face.imageSize.width}x${face.imageSize.height} frame but the frame is ${width}x${height}`,
      );
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
    const lips = new Float32Array(N * SYNTH_KEYPOINT_COUNT * 2);
    const shape = new Float32Array(N * shapeKeys.length);
    group.forEach((canvas, n) => {
      lips.set(canvas.face.lips, n * SYNTH_KEYPOINT_COUNT * 2);
      shapeKeys.forEach((k, j) => (shape[n * shapeKeys.length + j] = canvas.shape[k] ?? 0));
    });
    const feeds: Record<string, ort.Tensor> = {
      [SYNTH_INPUTS.lips]: new ort.Tensor('float32', lips, [N, SYNTH_KEYPOINT_COUNT, 2]),
      [SYNTH_INPUTS.shape]: new ort.Tensor('float32', shape, [N, shapeKeys.length]),
    };
    if (palettes) {
      feeds[SYNTH_INPUTS.palette] = await palettes.of(S, group);
      feeds[SYNTH_INPUTS.size] = new ort.Tensor('int64', BigInt64Array.of(BigInt(S)), [1]);
    } else {
      feeds[LEGACY_CROP_INPUT] = new ort.Tensor('uint8', fillCrops(S, group), [N, S, S, 4]);
    }
    const layers = warpLayers(await session.run(feeds), S);
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
    async layers(frame, face, shape) {
      checkFrame(frame);
      checkItem(0, face, shape, frame.width, frame.height);
      let out: { S: number; layers: WarpLayers } | null = null;
      await drawAll([
        {
          face,
          shape,
          crop: (S, dst, offset, region) => cropToRgba(frame, face.box, S, dst, offset, region),
          composite: (S, layers) => (out = { S, layers: { ...layers } }),
        },
      ]);
      return out;
    },
    async release() {
      await session.release();
      await palettes?.release();
    },
  };
}

async function loadGraph(path: string, ep: ExecutionProvider, threads: number): Promise<ort.InferenceSession> {
  try {
    return await ort.InferenceSession.create(path, sessionOptions(ep, threads));
  } catch (err) {
    const hint =
      ep === 'cuda'
        ? ' (ONNX Runtime needs its CUDA provider beside onnxruntime-node, built for the CUDA major version of the host: docs/deploy.md, "GPU workers")'
        : '';
    throw new Error(`could not load the mouth synthesis model ${path} on ${ep}${hint}: ${String(err)}`, { cause: err });
  }
}

/** The crops of a group's frames, [N,S,S,4], each filled only where the palette graph reads. */
function fillCrops(S: number, group: readonly Canvas[]): Uint8Array {
  const plane = S * S;
  const crop = new Uint8Array(group.length * 4 * plane);
  group.forEach((canvas, n) => canvas.crop(S, crop, n * 4 * plane, synthReadRegion(canvas.face.lips, S)));
  return crop;
}

/**
 * What the synthesis graph needs of a frame's pixels (the palette graph's output), per prepared
 * face. A face is the geometry of one source frame, so its palette is measured the first time it is
 * drawn and kept; the key is that geometry (the crop box and the key points, which still identify the
 * face after a copy to a lip-sync thread). The least recently used go first when the cache is full.
 */
class PaletteCache {
  private readonly kept = new Map<string, Float32Array>();
  private readonly width: number;

  constructor(
    private readonly session: ort.InferenceSession,
    private readonly capacity: number,
  ) {
    const { crop, lips } = PALETTE_INPUTS;
    if (
      !session.inputNames.includes(crop) ||
      !session.inputNames.includes(lips) ||
      !session.outputNames.includes(PALETTE_OUTPUT)
    ) {
      throw new Error(
        `not a mouth palette graph: it needs inputs "${crop}" and "${lips}" and an output "${PALETTE_OUTPUT}"`,
      );
    }
    const meta = session.outputMetadata.find((m) => m.name === PALETTE_OUTPUT);
    this.width = meta?.isTensor && typeof meta.shape[1] === 'number' ? meta.shape[1] : 0;
    if (!(this.width > 0)) throw new Error('not a mouth palette graph: its palette has no fixed width');
  }

  /** The group's palettes as one [N, P] tensor, measuring the faces not seen before (one run for all of them). */
  async of(S: number, group: readonly Canvas[]): Promise<ort.Tensor> {
    const keys = group.map((c) => faceKey(c.face));
    const missing = new Map<string, Canvas>();
    keys.forEach((k, n) => {
      if (!this.kept.has(k) && !missing.has(k)) missing.set(k, group[n]!);
    });
    if (missing.size > 0) {
      const canvases = [...missing.values()];
      const lips = new Float32Array(canvases.length * SYNTH_KEYPOINT_COUNT * 2);
      canvases.forEach((c, n) => lips.set(c.face.lips, n * SYNTH_KEYPOINT_COUNT * 2));
      const res = await this.session.run({
        [PALETTE_INPUTS.crop]: new ort.Tensor('uint8', fillCrops(S, canvases), [canvases.length, S, S, 4]),
        [PALETTE_INPUTS.lips]: new ort.Tensor('float32', lips, [canvases.length, SYNTH_KEYPOINT_COUNT, 2]),
      });
      const data = res[PALETTE_OUTPUT]!.data as Float32Array;
      [...missing.keys()].forEach((k, n) => this.keep(k, data.slice(n * this.width, (n + 1) * this.width)));
    }
    const out = new Float32Array(group.length * this.width);
    keys.forEach((k, n) => {
      const palette = this.kept.get(k)!;
      this.kept.delete(k); // the most recently used go last
      this.kept.set(k, palette);
      out.set(palette, n * this.width);
    });
    return new ort.Tensor('float32', out, [group.length, this.width]);
  }

  private keep(key: string, palette: Float32Array): void {
    this.kept.set(key, palette);
    while (this.kept.size > this.capacity) this.kept.delete(this.kept.keys().next().value!);
  }

  release(): Promise<void> {
    this.kept.clear();
    return this.session.release();
  }
}

function faceKey(face: PreparedFace): string {
  const { cx, cy, size, angle } = face.box;
  return `${face.cropSize} ${cx} ${cy} ${size} ${angle} ${Buffer.from(face.lips.buffer, face.lips.byteOffset, face.lips.byteLength).toString('base64')}`;
}

/**
 * The shape parameters a graph takes, in order: all of MOUTH_SHAPE_KEYS, or the first three for a graph
 * of the first contract (benchmarks and the gallery run the previous graph beside this one).
 */
function graphShapeKeys(session: ort.InferenceSession): readonly (typeof MOUTH_SHAPE_KEYS)[number][] {
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
