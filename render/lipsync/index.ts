/**
 * Lip-sync engine selection: the built-in mouth synthesis (render/synth) or a Wav2Lip-class ONNX
 * model (contract.ts), chosen by configuration (LIPSYNC_MODEL=builtin|<path to .onnx>); the crop
 * and blend such a model's frames go through (face.ts), and its audio front-end (mel.ts).
 */
export { createLipSync, lipSyncRegion, loadNeuralLipSync } from './engine.ts';
export { createLipSyncThread } from './thread.ts';
export { createLipSyncThreads } from './pool.ts';
export type { LipSyncEngine, LipSyncFace, LipSyncI420Item, LipSyncItem } from './engine.ts';
export { NEURAL_MASK, prepareFaceForNeural } from './face.ts';
export { toTurnedRect as toRect } from '../synth/prepare.ts';
export type { NeuralFace } from './face.ts';
export { LIPSYNC_ENV, LipSyncModelError, parseLipSyncChoice } from './contract.ts';
export { frameAudioSpan, melSpectrogram, melWindow, melWindowOfAudio, MEL_SAMPLE_RATE } from './mel.ts';
export type { FrameAudio, MelSpectrogram } from './mel.ts';
export { voiceLikeBuzz, warmUpLipSync, warmUpRig } from './warm-up.ts';
