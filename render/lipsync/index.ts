/**
 * Lip-sync engine selection: the built-in mouth synthesis (render/synth) or a
 * Wav2Lip-class ONNX model of the contract in contract.ts, chosen by
 * configuration (LIPSYNC_MODEL=builtin|<path to .onnx>), plus the model's
 * audio front-end (mel.ts).
 */
export { createLipSync, lipSyncRegion, renderI420InPlace, loadNeuralLipSync, prepareFaceForNeural, prepareLipSyncFace } from './engine.ts';
export { createLipSyncThread } from './thread.ts';
export { createLipSyncThreads, lipSyncPool } from './pool.ts';
export type { LipSyncEngine, LipSyncFace, LipSyncI420Item, LipSyncItem, LipSyncOptions, NeuralFace } from './engine.ts';
export { LIPSYNC_ENV, LipSyncModelError, NEURAL_FACE_SIZE, parseLipSyncChoice } from './contract.ts';
export type { LipSyncChoice } from './contract.ts';
export { melSpectrogram, melWindow, melFilterbank, MEL_BANDS, MEL_WINDOW_FRAMES, MEL_SAMPLE_RATE } from './mel.ts';
export type { MelSpectrogram } from './mel.ts';
