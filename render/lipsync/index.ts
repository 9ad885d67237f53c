/**
 * Lip-sync engine selection: the built-in mouth synthesis (render/synth) or a Wav2Lip-class ONNX
 * model (contract.ts), chosen by configuration (LIPSYNC_MODEL=builtin|<path to .onnx>); the crop
 * and blend such a model's frames go through (face.ts), and its audio front-end (mel.ts).
 */
export { createLipSync, lipSyncRegion, loadNeuralLipSync, prepareLipSyncFace } from './engine.ts';
export { createLipSyncThread } from './thread.ts';
export { createLipSyncThreads, lipSyncPool } from './pool.ts';
export type { FrameSound, LipSyncEngine, LipSyncFace, LipSyncI420Item, LipSyncItem, LipSyncOptions } from './engine.ts';
export { NEURAL_CROP_PADS, NEURAL_MASK, prepareFaceForNeural } from './face.ts';
export { toTurnedRect as toRect } from '../synth/prepare.ts';
export type { FaceRect, NeuralFace } from './face.ts';
export { LIPSYNC_ENV, LipSyncModelError, parseLipSyncChoice, readNeuralContract } from './contract.ts';
export type { LipSyncChoice, NeuralContract, TensorMeta } from './contract.ts';
export {
  frameAudioSpan,
  melSpectrogram,
  melWindow,
  melWindowOfAudio,
  melFilterbank,
  MEL_BANDS,
  MEL_WINDOW_FRAMES,
  MEL_SAMPLE_RATE,
} from './mel.ts';
export type { FrameAudio, MelSpectrogram } from './mel.ts';
