/**
 * Built-in lip-sync synthesis: mouth and jaw deformation plus inner-mouth
 * synthesis (teeth, cavity, tongue) as one ONNX graph, composited into the
 * frame. See engine.ts for use and contract.ts for the graph's I/O.
 */
export { createMouthSynth, isNeutral, MOUTH_PALETTE_MODEL } from './engine.ts';
export type { MouthSynth, SynthItem } from './engine.ts';
export { prepareFaceForSynth, toCrop, fromCrop } from './prepare.ts';
export type { PreparedFace } from './prepare.ts';
export type { RgbaFrame } from './image.ts';
export type { MouthShape } from './contract.ts';
