/**
 * One interface over both lip-sync paths, chosen by configuration:
 *
 *   const lipsync = await createLipSync(process.env.LIPSYNC_MODEL);   // or a LipSyncChoice
 *   const face = lipsync.prepare(rigOfThisFrame);
 *   const [rgba] = await lipsync.renderFrames([{ frame, face, shape, mel: melWindow(mel, i, 25) }]);
 *
 * The built-in path uses `shape` (visemes) and ignores the audio; a neural model uses the audio
 * (a mel window, or the frame's audio to compute it from) and ignores `shape` (`needsAudio` says
 * which). Each runs one ONNX session per batch and touches only the lower face.
 */
import { existsSync } from 'node:fs';
import * as ort from '../onnx/runtime.ts';
import type { FaceRig } from '../rig/types.ts';
import type { MouthShape } from '../synth/contract.ts';
import { sessionOptions, type ExecutionProvider } from '../onnx/session.ts';
import type { MouthSynth } from '../synth/engine.ts';
import { createMouthSynth } from '../synth/engine.ts';
import type { RgbaFrame } from '../synth/image.ts';
import { checkFrame, checkI420Frame } from '../synth/image.ts';
import type { PreparedFace } from '../synth/prepare.ts';
import { prepareFaceForSynth } from '../synth/prepare.ts';
import type { PixelRect } from '../encode/frames.ts';
import type { LipSyncChoice, NeuralContract, TensorMeta } from './contract.ts';
import { LipSyncModelError, NEURAL_FACE_CHANNELS, parseLipSyncChoice, readNeuralContract } from './contract.ts';
import {
  cropFace,
  faceRectBounds,
  i420Sampler,
  pasteFaceI420,
  pasteFaceRgba,
  prepareFaceForNeural,
  rgbaSampler,
  type NeuralFace,
  type PixelSampler,
} from './face.ts';
import { MEL_BANDS, MEL_WINDOW_FRAMES, melWindowOfAudio, type FrameAudio } from './mel.ts';

export type LipSyncFace = (PreparedFace & { kind: 'builtin' }) | NeuralFace;

/**
 * What a neural model hears for a frame: its [80 * 16] mel window (melWindow()), or the audio
 * around it (FrameAudio) for the engine to compute the window from (what a live call sends: the
 * lip-sync thread then does that work too).
 */
interface FrameSound {
  mel?: Float32Array;
  audio?: FrameAudio;
}

export interface LipSyncItem extends FrameSound {
  frame: RgbaFrame;
  face: LipSyncFace;
  /** Used by the built-in path. */
  shape: MouthShape;
  target?: Uint8Array | Uint8ClampedArray;
}

/**
 * A frame drawn in place as I420 (what a live call publishes), by either engine on the I420 planes
 * themselves. For a lip-sync thread the frame lives on a SharedArrayBuffer, so the thread does all
 * of the drawing.
 */
export interface LipSyncI420Item extends FrameSound {
  i420: Uint8Array;
  width: number;
  height: number;
  face: LipSyncFace;
  shape: MouthShape;
}

export interface LipSyncEngine {
  readonly kind: 'builtin' | 'neural';
  /** True when frames need their sound (a neural model), false when they need a shape. */
  readonly needsAudio: boolean;
  /** How a neural model loaded in this process runs (its tensors, face size, batch); absent otherwise. */
  readonly contract?: NeuralContract;
  prepare(rig: FaceRig): LipSyncFace;
  renderFrames(items: readonly LipSyncItem[]): Promise<(Uint8Array | Uint8ClampedArray)[]>;
  /** Draws every item's mouth into its I420 frame, in place (one batch, as renderFrames). */
  renderI420(items: readonly LipSyncI420Item[]): Promise<void>;
  release(): Promise<void>;
}

/**
 * The pixels of a frame an engine reads or writes for this face: its crop, turned with the face,
 * and the bilinear taps around it. A frame valid only there renders the same there as the whole
 * frame does, so a caller may convert just this rectangle (e.g. out of I420 and back).
 */
export function lipSyncRegion(face: LipSyncFace): PixelRect {
  if (face.kind === 'neural') return faceRectBounds(face.rect);
  const { cx, cy, size, angle } = face.box;
  return faceRectBounds({ cx, cy, width: size, height: size, angle });
}

/**
 * The face geometry an engine of `kind` needs for frames measured by `rig` (pure arithmetic).
 * `cropSize` (built-in engine only): a crop edge other than the one the face's size calls for.
 */
export function prepareLipSyncFace(kind: LipSyncEngine['kind'], rig: FaceRig, cropSize?: number): LipSyncFace {
  return kind === 'builtin'
    ? { ...prepareFaceForSynth(rig, cropSize === undefined ? {} : { cropSize }), kind: 'builtin' }
    : prepareFaceForNeural(rig);
}

export interface LipSyncOptions {
  executionProvider?: ExecutionProvider;
  intraOpNumThreads?: number;
  /** The built-in engine's synthesis graph, if not the shipped one (benchmarks: the previous graph beside this one). */
  synthModelPath?: string;
}

export async function createLipSync(
  choice: LipSyncChoice | string | undefined,
  options: LipSyncOptions = {},
): Promise<LipSyncEngine> {
  const c = typeof choice === 'object' ? choice : parseLipSyncChoice(choice);
  if (c.kind === 'builtin') {
    const { synthModelPath, ...rest } = options;
    return builtinEngine(await createMouthSynth(synthModelPath ? { ...rest, modelPath: synthModelPath } : rest));
  }
  return loadNeuralLipSync(c.path, options);
}

function builtinEngine(synth: MouthSynth): LipSyncEngine {
  const renderFrames: LipSyncEngine['renderFrames'] = (items) =>
    synth.renderFrames(
      items.map((it) => {
        if (it.face.kind !== 'builtin') throw new TypeError('this face was prepared for another lip-sync engine');
        return it.target
          ? { frame: it.frame, face: it.face, shape: it.shape, target: it.target }
          : { frame: it.frame, face: it.face, shape: it.shape };
      }),
    );
  return {
    kind: 'builtin',
    needsAudio: false,
    prepare: (rig) => prepareLipSyncFace('builtin', rig),
    renderFrames,
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

/** Load an ONNX model of the neural contract (contract.ts), refusing anything else with a LipSyncModelError naming what does not fit. */
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
    throw new LipSyncModelError(`${path} is not a Wav2Lip-class lip-sync model: ${why}`, path);
  };
  const contract = readNeuralContract(
    session.inputMetadata as readonly TensorMeta[],
    session.outputMetadata as readonly TensorMeta[],
  );
  if (typeof contract === 'string') return refuse(contract);
  const S = contract.faceSize;
  // Shapes the model leaves open say little: a probe run finds the face output, a second one whether a batch of 2 runs.
  const probe = async (n: number) => {
    const res = await runModel(
      session,
      contract,
      new Float32Array(n * MEL).fill(-4),
      new Float32Array(n * NEURAL_FACE_CHANNELS * S * S).fill(0.5),
      n,
    );
    return contract.faceOutputs.find((name) => sameDims(res[name]!.dims, [n, 3, S, S]));
  };
  const output = await probe(1).catch((err: unknown) => refuse(`a probe run with a batch of 1 failed: ${String(err)}`));
  if (!output)
    return refuse(
      `a probe run gave no face output [1,3,${S},${S}] (${contract.faceOutputs.map((o) => `\`${o}\``).join(', ')})`,
    );
  // A batch the model calls dynamic but cannot run (a size baked into a reshape) runs one frame at a time.
  const fixedBatch = contract.fixedBatch || (await probe(2).catch(() => undefined)) !== output;
  return neuralEngine(session, { ...contract, faceOutputs: [output], fixedBatch });
}

const MEL = MEL_BANDS * MEL_WINDOW_FRAMES;

function sameDims(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

function runModel(
  session: ort.InferenceSession,
  c: NeuralContract,
  mel: Float32Array,
  face: Float32Array,
  n: number,
): Promise<ort.InferenceSession.ReturnType> {
  return session.run({
    [c.melInput]: new ort.Tensor('float32', mel, [n, 1, MEL_BANDS, MEL_WINDOW_FRAMES]),
    [c.faceInput]: new ort.Tensor('float32', face, [n, NEURAL_FACE_CHANNELS, c.faceSize, c.faceSize]),
  });
}

/** The item's mel window: given, or computed from its audio. */
function melOf(sound: FrameSound, i: number): Float32Array {
  if (sound.mel) {
    if (sound.mel.length !== MEL)
      throw new RangeError(
        `item ${i}: the mel window has ${sound.mel.length} values, not ${MEL_BANDS}x${MEL_WINDOW_FRAMES}`,
      );
    return sound.mel;
  }
  if (sound.audio) return melWindowOfAudio(sound.audio);
  throw new RangeError(
    `item ${i}: a neural lip-sync model needs a mel window of ${MEL_BANDS}x${MEL_WINDOW_FRAMES} (melWindow()) or the frame's audio (FrameAudio)`,
  );
}

/** A window of pure silence (every value at the floor): the frame is left exactly as it is, as the built-in engine leaves it for a closed mouth. */
function silent(mel: Float32Array): boolean {
  for (let i = 0; i < mel.length; i++) if (mel[i]! > -4 + 1e-6) return false;
  return true;
}

/** One frame for the model: where its face is read from, what it hears, and where the new face goes. */
interface FaceJob {
  face: NeuralFace;
  sample: PixelSampler;
  mel: Float32Array;
  paste(out: Float32Array, offset: number): void;
}

function neuralFaceOf(face: LipSyncFace, i: number, width: number, height: number): NeuralFace {
  if (face.kind !== 'neural') throw new TypeError('this face was prepared for another lip-sync engine');
  if (face.imageSize.width !== width || face.imageSize.height !== height) {
    throw new RangeError(
      `item ${i}: the face was prepared on a ${face.imageSize.width}x${face.imageSize.height} frame but the frame is ${width}x${height}`,
    );
  }
  return face;
}

function neuralEngine(session: ort.InferenceSession, contract: NeuralContract): LipSyncEngine {
  const S = contract.faceSize;
  const plane = S * S;
  const output = contract.faceOutputs[0]!;
  // A fixed-batch model takes one frame per run; a dynamic one takes the whole batch in one.
  const run = async (jobs: readonly FaceJob[]): Promise<void> => {
    const per = contract.fixedBatch ? 1 : Math.max(1, jobs.length);
    for (let at = 0; at < jobs.length; at += per) {
      const part = jobs.slice(at, at + per);
      const n = part.length;
      const face = new Float32Array(n * NEURAL_FACE_CHANNELS * plane);
      const mel = new Float32Array(n * MEL);
      part.forEach((job, k) => {
        const base = k * NEURAL_FACE_CHANNELS * plane;
        // Channels 3..5: the reference (the frame itself); 0..2: the same with rows S/2.. left at 0.
        cropFace(job.sample, job.face.rect, S, face, base + 3 * plane);
        for (let ch = 0; ch < 3; ch++)
          face.copyWithin(base + ch * plane, base + (3 + ch) * plane, base + (3 + ch) * plane + (S >> 1) * S);
        mel.set(job.mel, k * MEL);
      });
      const out = (await runModel(session, contract, mel, face, n))[output]!.data as Float32Array;
      part.forEach((job, k) => job.paste(out, k * 3 * plane));
    }
  };
  const renderFrames: LipSyncEngine['renderFrames'] = async (items) => {
    const jobs: FaceJob[] = [];
    const results = items.map((it, i) => {
      checkFrame(it.frame);
      const face = neuralFaceOf(it.face, i, it.frame.width, it.frame.height);
      const mel = melOf(it, i);
      const target = it.target ?? new Uint8Array(it.frame.data.length);
      if (target !== it.frame.data) target.set(it.frame.data);
      if (!silent(mel))
        jobs.push({
          face,
          mel,
          sample: rgbaSampler(it.frame),
          paste: (out, o) => pasteFaceRgba(it.frame, target, face, out, o, S),
        });
      return target;
    });
    await run(jobs);
    return results;
  };
  const renderI420: LipSyncEngine['renderI420'] = async (items) => {
    const jobs: FaceJob[] = [];
    items.forEach((it, i) => {
      const frame = { data: it.i420, width: it.width, height: it.height };
      checkI420Frame(frame);
      const face = neuralFaceOf(it.face, i, it.width, it.height);
      const mel = melOf(it, i);
      if (!silent(mel))
        jobs.push({ face, mel, sample: i420Sampler(frame), paste: (out, o) => pasteFaceI420(frame, face, out, o, S) });
    });
    await run(jobs);
  };
  return {
    kind: 'neural',
    needsAudio: true,
    contract,
    prepare: prepareFaceForNeural,
    renderFrames,
    renderI420,
    release: () => session.release(),
  };
}
