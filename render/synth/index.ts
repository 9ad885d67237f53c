/**
 * Built-in lip-sync synthesis: mouth and jaw deformation plus inner-mouth
 * synthesis (teeth, cavity, tongue) as one ONNX graph, composited into the
 * frame. See engine.ts for use and contract.ts for the graph's I/O.
 */
export { createMouthSynth, isNeutral, MOUTH_PALETTE_MODEL, MOUTH_SYNTH_MODEL } from './engine.ts';
export type { ExecutionProvider, MouthSynth, MouthSynthOptions, SynthItem } from './engine.ts';
export { autoCropSize, prepareFaceForSynth, toCrop, fromCrop } from './prepare.ts';
export type { CropBox, PreparedFace, PrepareOptions } from './prepare.ts';
export type { RgbaFrame } from './image.ts';
export { DEFAULT_CROP_SIZE, NEUTRAL_SHAPE, SYNTH_KEYPOINTS } from './contract.ts';
export type { MouthShape } from './contract.ts';
