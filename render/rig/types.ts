/** Public data shapes of the face rig. All coordinates are image pixels (x right, y down). */

export interface Point {
  x: number;
  y: number;
}

/** A landmark. `z` is relative depth in the same pixel scale as x; smaller = closer to the camera. */
export interface Point3 extends Point {
  z: number;
}

export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/**
 * "left"/"right" are the subject's own: the subject's left eye is on the
 * image's right in an ordinary (non-mirrored) portrait.
 */
export interface EyeRig {
  /** Closed loop around the eye opening: outer corner, along the upper lid, inner corner, back along the lower lid. */
  contour: Point[];
  center: Point;
  /**
   * Lid gap over eye width (the "eye aspect ratio"). About 0.25-0.35 for an
   * open eye, under about 0.1 for a closed one.
   */
  openness: number;
}

/** Degrees, estimated from the 3D landmarks; 0/0/0 is a face looking straight into the camera. */
export interface HeadPose {
  /** Positive: the nose points towards the image's right. */
  yaw: number;
  /** Positive: the nose points up (chin raised). Zero: chin and outer eye corners at the same depth. */
  pitch: number;
  /** Positive: the head is tilted clockwise as seen in the image. */
  roll: number;
}

export interface FaceRig {
  imageSize: { width: number; height: number };
  /** Tight box around all landmarks (forehead to chin, cheek to cheek). */
  box: Box;
  /** The detector's box (brows to chin, roughly) and its confidence in [0, 1]. */
  detection: { box: Box; score: number };
  /** Face Mesh's own face-presence probability for the fitted landmarks, [0, 1]. */
  presence: number;
  /** The 468 MediaPipe Face Mesh landmarks, in its standard index order (see topology.ts). */
  landmarks: Point3[];
  /** Closed loops, starting at the subject's right mouth corner and running along the upper lip first. */
  lips: { outer: Point[]; inner: Point[] };
  eyes: { left: EyeRig; right: EyeRig };
  /** Closed loop around the face, from the top of the forehead, clockwise in the image. */
  faceOval: Point[];
  /** Inner-lip gap over mouth width: 0 closed, about 0.3+ clearly open. */
  mouthOpenness: number;
  pose: HeadPose;
}
