/**
 * Face rig from a portrait: landmarks, lips, eyes, openness and head pose,
 * computed with MediaPipe's face detector and Face Mesh converted to ONNX
 * (render/models/face/) and run on onnxruntime-node (CPU).
 *
 *   import { detectFaceRig, RigError } from '../render/rig/index.ts';
 *   try { const rig = await detectFaceRig(bytesOrPath); }
 *   catch (e) { if (e instanceof RigError) showToUser(e.code, e.message); else throw e; }
 */
export { detectFaceRig, DEFAULT_RIG_LIMITS, MIN_PRESENCE, RIVAL_FACE_RATIO } from './rig.ts';
export { rigFromLandmarks } from './assemble.ts';
export { FaceTracker } from './track.ts';
export type { TrackedFrame } from './track.ts';
export type { RigLimits, RigOptions } from './rig.ts';
export { RigError, RIG_ERROR_CODES, isRigError } from './errors.ts';
export type { RigErrorCode } from './errors.ts';
export { MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE, MIN_IMAGE_SIDE } from './image.ts';
export { releaseRigSessions, warmUpRig } from './models.ts';
export type { Box, EyeRig, FaceRig, HeadPose, Point, Point3 } from './types.ts';
export * as topology from './topology.ts';
