/**
 * The neural lip-sync model contract: a Wav2Lip-class ONNX model can be
 * dropped in by configuration (LIPSYNC_MODEL=<path to .onnx>) in place of
 * the built-in mouth synthesis.
 *
 * A model of this contract has exactly two float32 inputs and one float32 output:
 *
 *   mel   [N, 1, 80, 16]   the normalised log-mel window of the audio around the frame
 *                          (Wav2Lip's front-end, see mel.ts: 80 bands, 16 frames of
 *                          12.5 ms = 200 ms from the frame's time, values in [-4, 4])
 *   face  [N, 6, 96, 96]   channels 0..2: the target face crop with its lower half
 *                          (rows 48..95) zeroed; channels 3..5: a reference crop of the
 *                          same face (here: the same frame, unmasked). BGR, [0, 1],
 *                          as Wav2Lip was trained (OpenCV images / 255)
 *   out   [N, 3, 96, 96]   the face crop with the mouth for this audio, BGR, [0, 1]
 *
 * The inputs are recognised by shape (the one with 1 channel is the mel, the one
 * with 6 the face), so the usual Wav2Lip exports (`audio_sequences`/`face_sequences`,
 * `mel`/`face`, `audio`/`video`...) load unchanged; N must be dynamic (or 1).
 * The face crop is a square around the rig's face box, rotated with the eyes;
 * the output is composited back over the lower face only, with a feathered mask.
 */
export const NEURAL_FACE_SIZE = 96;
export const NEURAL_FACE_CHANNELS = 6;
export const NEURAL_MEL_SHAPE = [1, 80, 16] as const;
export const NEURAL_OUT_SHAPE = [3, 96, 96] as const;
/** First row of the crop that is masked in the target (the lower half). */
export const NEURAL_MASK_FROM_ROW = 48;

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
