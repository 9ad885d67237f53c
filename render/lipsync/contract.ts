/**
 * The neural lip-sync model contract: a Wav2Lip-class ONNX model can be dropped in by configuration
 * (LIPSYNC_MODEL=<path to .onnx>) in place of the built-in mouth synthesis. The common community
 * exports of Rudrabha's Wav2Lip.forward(audio_sequences, face_sequences) load as they are:
 *
 *   mel   float32 [N, 1, 80, 16]   the normalised log-mel window of the 200 ms from the frame's time
 *                                  (Wav2Lip's front-end, mel.ts: 80 bands, 16 frames of 12.5 ms,
 *                                  values in [-4, 4])
 *   face  float32 [N, 6, H, H]     channels 0..2: the target face crop with rows H/2..H-1 zeroed;
 *                                  3..5: a reference crop of the same face (here: the same frame,
 *                                  unmasked). BGR in [0, 1], as Wav2Lip was trained (OpenCV / 255)
 *   out   float32 [N, 3, H, H]     the face crop with the mouth for this audio, BGR in [0, 1]
 *
 * The inputs are told apart by their channels (the 1-channel one is the mel, the 6-channel one the
 * face), never by name, so `audio_sequences`/`face_sequences`, `source`/`target`,
 * `mel_spectrogram`/`video_frames` and `mel`/`image` all load. H is read from the face input (a
 * multiple of 32 from 64 to 512: 96 for Wav2Lip, 128 to 384 for its larger retrainings), and the
 * batch too: fixed at 1, a model runs one frame per run; dynamic, a whole batch per run. Of several
 * outputs, the one shaped [N, 3, H, H] is the face. Anything else is refused when the model loads,
 * naming what does not fit (readNeuralContract).
 */
export const NEURAL_FACE_CHANNELS = 6;
const NEURAL_MEL_SHAPE = [1, 80, 16] as const;
/** Face sizes (H = W) a model may take: multiples of NEURAL_FACE_STEP in [NEURAL_FACE_MIN, NEURAL_FACE_MAX]. */
const NEURAL_FACE_MIN = 64;
const NEURAL_FACE_MAX = 512;
const NEURAL_FACE_STEP = 32;
/** Wav2Lip's own face size: assumed for a face input whose size is not fixed in the model. */
const WAV2LIP_FACE_SIZE = 96;

export const LIPSYNC_ENV = 'LIPSYNC_MODEL';

export type LipSyncChoice = { kind: 'builtin' } | { kind: 'onnx'; path: string };

export class LipSyncModelError extends Error {
  constructor(
    message: string,
    readonly model: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'LipSyncModelError';
  }
}

/**
 * Read a LIPSYNC_MODEL-style setting: unset, empty or "builtin" selects the
 * built-in mouth synthesis; anything else must be a path to an .onnx file of
 * the contract above (checked when the engine loads it).
 */
export function parseLipSyncChoice(value: string | undefined): LipSyncChoice {
  const v = value?.trim() ?? '';
  if (v === '' || v.toLowerCase() === 'builtin') return { kind: 'builtin' };
  if (!v.toLowerCase().endsWith('.onnx')) {
    throw new LipSyncModelError(
      `${LIPSYNC_ENV} must be "builtin" or a path to an .onnx model of the Wav2Lip-class contract, got "${v}"`,
      v,
    );
  }
  return { kind: 'onnx', path: v };
}

/** What a model says of one of its inputs or outputs (onnxruntime's ValueMetadata has this shape). */
export type TensorMeta =
  | { name: string; isTensor: true; type: string; shape: readonly (number | string)[] }
  | { name: string; isTensor: false };

/** How to run a model of the contract, read from its inputs and outputs. */
export interface NeuralContract {
  melInput: string;
  faceInput: string;
  /** The outputs that may be the face ([N,3,H,H] as far as the model says), best first; a probe run picks one. */
  faceOutputs: string[];
  /** H (= W) of the face crop. */
  faceSize: number;
  /** True when the model takes one frame per run (its batch is fixed at 1). */
  fixedBatch: boolean;
}

const CONTRACT = 'a Wav2Lip-class model has a 1-channel mel [N,1,80,16] and a 6-channel face [N,6,H,H]';

/** `name float32 [1,6,96,96]`, symbolic dimensions by name. */
function describeTensor(m: TensorMeta): string {
  return m.isTensor
    ? `\`${m.name}\` ${m.type} [${m.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : d === '' || d === -1 ? '?' : d)).join(',')}]`
    : `\`${m.name}\` (not a tensor)`;
}

const fixed = (d: number | string | undefined): d is number => typeof d === 'number' && d >= 0;

/**
 * The contract of a model with these inputs and outputs, or why it has none: a sentence naming the
 * input or output that does not fit (what LipSyncModelError says at start-up).
 */
export function readNeuralContract(
  inputs: readonly TensorMeta[],
  outputs: readonly TensorMeta[],
): NeuralContract | string {
  if (inputs.length !== 2)
    return `it has ${inputs.length} input${inputs.length === 1 ? '' : 's'} (${inputs.map(describeTensor).join('; ')}); ${CONTRACT}`;
  for (const m of inputs) {
    if (!m.isTensor) return `input \`${m.name}\` is not a tensor; ${CONTRACT}`;
    if (m.type !== 'float32') return `input ${describeTensor(m)} is ${m.type}, not float32; ${CONTRACT}`;
    if (m.shape.length !== 4) return `input ${describeTensor(m)} has ${m.shape.length} dimensions, not 4; ${CONTRACT}`;
    const c = m.shape[1];
    if (!fixed(c)) return `input ${describeTensor(m)} does not fix its channels; ${CONTRACT}`;
    if (c !== 1 && c !== NEURAL_FACE_CHANNELS) return `input \`${m.name}\` has ${c} channels; ${CONTRACT}`;
  }
  const ins = inputs as Extract<TensorMeta, { isTensor: true }>[];
  const mel = ins.find((m) => m.shape[1] === 1);
  const face = ins.find((m) => m.shape[1] === NEURAL_FACE_CHANNELS);
  if (!mel || !face)
    return `both inputs have ${ins[0]!.shape[1]} channel${ins[0]!.shape[1] === 1 ? '' : 's'} (${ins.map(describeTensor).join('; ')}); ${CONTRACT}`;

  const [, , bands, frames] = mel.shape;
  if ((fixed(bands) && bands !== NEURAL_MEL_SHAPE[1]) || (fixed(frames) && frames !== NEURAL_MEL_SHAPE[2])) {
    return `the mel input ${describeTensor(mel)} is not [N,1,80,16] (80 mel bands by 16 frames of 12.5 ms)`;
  }
  const [, , h, w] = face.shape;
  if (fixed(h) && fixed(w) && h !== w)
    return `the face input ${describeTensor(face)} is ${h}x${w}; the face crop is square (H = W)`;
  const size = fixed(h) ? h : fixed(w) ? w : WAV2LIP_FACE_SIZE;
  if (size < NEURAL_FACE_MIN || size > NEURAL_FACE_MAX || size % NEURAL_FACE_STEP !== 0) {
    return `the face input ${describeTensor(face)} is ${size}x${size}; the face size is a multiple of ${NEURAL_FACE_STEP} from ${NEURAL_FACE_MIN} to ${NEURAL_FACE_MAX} (96 for Wav2Lip)`;
  }
  for (const m of [mel, face]) {
    const n = m.shape[0];
    if (fixed(n) && n !== 1)
      return `input ${describeTensor(m)} has a fixed batch of ${n}; a Wav2Lip-class model takes a batch of 1 or a dynamic one`;
  }
  const fixedBatch = mel.shape[0] === 1 || face.shape[0] === 1;

  const fits = (d: number | string | undefined, want: number) => !fixed(d) || d === want;
  const candidates = outputs.filter(
    (m): m is Extract<TensorMeta, { isTensor: true }> =>
      m.isTensor &&
      m.type === 'float32' &&
      m.shape.length === 4 &&
      fits(m.shape[1], 3) &&
      fits(m.shape[2], size) &&
      fits(m.shape[3], size) &&
      fits(m.shape[0], 1),
  );
  if (candidates.length === 0) {
    return `none of its outputs is a face [N,3,${size},${size}] for its ${size}x${size} face input (${outputs.map(describeTensor).join('; ')})`;
  }
  // Those that say they are [N,3,H,H] before those that leave it open.
  const exact = (m: Extract<TensorMeta, { isTensor: true }>) => (m.shape.slice(1).every(fixed) ? 0 : 1);
  const faceOutputs = candidates.sort((a, b) => exact(a) - exact(b)).map((m) => m.name);
  return { melInput: mel.name, faceInput: face.name, faceOutputs, faceSize: size, fixedBatch };
}
