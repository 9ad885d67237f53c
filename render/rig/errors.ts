/**
 * Typed refusals of the face rig. Callers (avatar creation, clip pose checks)
 * switch on `code`, which is stable API; `message` is for people and may change.
 */
export type RigErrorCode =
  | 'invalid_image' // not an image, corrupt, or an absurd size
  | 'no_face' // nothing that looks like a face
  | 'multiple_faces' // more than one face of similar size: which one to animate?
  | 'face_too_small' // a face, but too few pixels to rig and render well
  | 'extreme_pose'; // a face turned or tilted too far for a 2D rig

export class RigError extends Error {
  override readonly name = 'RigError';
  readonly code: RigErrorCode;
  /** Measured values behind the refusal (sizes, angles, counts), for logs and UI hints. */
  readonly details: Readonly<Record<string, number | string>>;

  constructor(
    code: RigErrorCode,
    message: string,
    details: Record<string, number | string> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.code = code;
    this.details = details;
  }
}

export function isRigError(err: unknown): err is RigError {
  return err instanceof RigError;
}
