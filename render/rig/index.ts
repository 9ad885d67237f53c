/**
 * Face rig from a portrait: landmarks, lips, eyes, openness and head pose,
 * computed with MediaPipe's face detector and Face Mesh converted to ONNX
 * (render/models/face/) and run on onnxruntime-node (CPU).
 *
 *   import { detectFaceRig, RigError } from '../render/rig/index.ts';
 *   try { const rig = await detectFaceRig(bytesOrPath); }
 *   catch (e) { if (e instanceof RigError) showToUser(e.code, e.message); else throw e; }
 */
export { detectFaceRig, DEFAULT_RIG_LIMITS } from './rig.ts';
export { rigFromLandmarks } from './assemble.ts';
export type { RigLimits } from './rig.ts';
export { RigError, isRigError } from './errors.ts';
export type { RigErrorCode } from './errors.ts';
export type { Box, FaceRig, Point } from './types.ts';
export * as topology from './topology.ts';
