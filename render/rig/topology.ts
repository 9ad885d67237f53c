/**
 * Landmark indices of MediaPipe Face Mesh v1 (468 points) that the rig uses.
 * The loops follow the connection lists MediaPipe publishes for the mesh
 * (FaceLandmarksConnections in the mediapipe wheel), joined into closed
 * contours. "Left"/"right" are the subject's own.
 */

export const LANDMARK_COUNT = 468;

/** Outer lip line: right mouth corner, upper lip to the left corner, lower lip back. */
export const LIPS_OUTER = [
  61, 185, 40, 39, 37, 0, 267, 269, 270, 409, 291, 375, 321, 405, 314, 17, 84, 181, 91, 146,
] as const;

/** Inner lip line (the mouth opening), same direction as LIPS_OUTER. */
export const LIPS_INNER = [
  78, 191, 80, 81, 82, 13, 312, 311, 310, 415, 308, 324, 318, 402, 317, 14, 87, 178, 88, 95,
] as const;

/** Subject's right eye (image left): outer corner 33, upper lid, inner corner 133, lower lid. */
export const RIGHT_EYE = [33, 246, 161, 160, 159, 158, 157, 173, 133, 155, 154, 153, 145, 144, 163, 7] as const;

/** Subject's left eye (image right): outer corner 263, upper lid, inner corner 362, lower lid. */
export const LEFT_EYE = [263, 466, 388, 387, 386, 385, 384, 398, 362, 382, 381, 380, 374, 373, 390, 249] as const;

export const FACE_OVAL = [
  10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400, 377, 152, 148, 176, 149, 150, 136,
  172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109,
] as const;

/** Eye corners, and (upper, lower) lid pairs across the middle of each eye for openness. */
export const RIGHT_EYE_CORNERS = { outer: 33, inner: 133 } as const;
export const LEFT_EYE_CORNERS = { outer: 263, inner: 362 } as const;
export const RIGHT_EYE_LIDS = [
  [160, 144],
  [159, 145],
  [158, 153],
] as const;
export const LEFT_EYE_LIDS = [
  [387, 373],
  [386, 374],
  [385, 380],
] as const;

export const MOUTH_CORNERS = { right: 61, left: 291 } as const;
/** (upper, lower) inner-lip pairs across the middle of the mouth. */
export const INNER_LIP_PAIRS = [
  [82, 87],
  [13, 14],
  [312, 317],
] as const;

/** Mirror pairs (subject's right, left) used for the face's left-right axis in pose estimation. */
export const SYMMETRIC_PAIRS = [
  [33, 263], // eye outer corners
  [133, 362], // eye inner corners
  [61, 291], // mouth corners
  [234, 454], // face edge at eye level
] as const;

/**
 * The face's up-down axis in pose estimation runs from the midpoint of the
 * outer eye corners (RIGHT_EYE_CORNERS.outer, LEFT_EYE_CORNERS.outer) to the chin.
 */
export const CHIN = 152;
