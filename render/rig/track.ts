/**
 * Face tracking through the frames of a video, MediaPipe's way: the full detection (detector on
 * the whole frame and on tiles, every candidate confirmed, the one face picked) runs on the first
 * frame and again only when the face is lost; every other frame fits the landmark model on a crop
 * placed from the previous frame's landmarks (about a fifth of the cost of a detection).
 *
 * Each frame gets a verdict: its landmarks (and, when the face is too small or turned too far for
 * the rig to animate, the problem), or why there is no face in it. Deciding what a clip with some
 * bad frames is worth is the caller's business.
 */
import { isRigError, type RigErrorCode } from './errors.ts';
import type { RgbImage } from './image.ts';
import {
  DEFAULT_RIG_LIMITS,
  findMainFace,
  fitLandmarks,
  landmarkProblem,
  MIN_PRESENCE,
  roiFromLandmarks,
  type RigLimits,
} from './rig.ts';
import type { Point3 } from './types.ts';

/** A frame's face, or why it has none. */
export type TrackedFrame =
  | {
      face: true;
      landmarks: Point3[];
      /** Face Mesh's presence probability of these landmarks. */
      presence: number;
      /** How the landmarks were found: a full detection, or the crop of the previous frame's face. */
      via: 'detected' | 'tracked';
      /** Set when the face is there but too small or too turned to animate (limits of the tracker). */
      problem?: { code: Extract<RigErrorCode, 'face_too_small' | 'extreme_pose'>; message: string };
    }
  | { face: false; code: Extract<RigErrorCode, 'no_face' | 'multiple_faces'>; message: string };

export class FaceTracker {
  private previous: Point3[] | undefined;
  private readonly limits: RigLimits;
  /** Detector confidence of the last full detection (the frame cache stores one for the clip). */
  detectionScore = 0;
  /** Full detections run so far (the expensive path), for cost reports. */
  detections = 0;

  constructor(limits: Partial<RigLimits> = {}) {
    this.limits = { ...DEFAULT_RIG_LIMITS, ...limits };
  }

  /** The face of the next frame (frames in order: each one is tracked from the one before). */
  async next(img: RgbImage): Promise<TrackedFrame> {
    if (this.previous) {
      const fit = await fitLandmarks(img, roiFromLandmarks(this.previous));
      if (fit.presence >= MIN_PRESENCE) return this.verdict(fit.points, fit.presence, 'tracked');
      this.previous = undefined; // lost: detect again
    }
    this.detections++;
    let first;
    try {
      first = await findMainFace(img);
    } catch (err) {
      if (isRigError(err) && (err.code === 'no_face' || err.code === 'multiple_faces'))
        return { face: false, code: err.code, message: err.message };
      throw err;
    }
    // As the still-image rig does: a second fit on a crop centred on the first fit's landmarks.
    const fit = await fitLandmarks(img, roiFromLandmarks(first.fit.points));
    if (fit.presence < MIN_PRESENCE)
      return { face: false, code: 'no_face', message: 'No clear face was found in the frame.' };
    this.detectionScore = first.face.score;
    return this.verdict(fit.points, fit.presence, 'detected');
  }

  private verdict(landmarks: Point3[], presence: number, via: 'detected' | 'tracked'): TrackedFrame {
    this.previous = landmarks;
    const problem = landmarkProblem(landmarks, this.limits);
    if (!problem) return { face: true, landmarks, presence, via };
    return {
      face: true,
      landmarks,
      presence,
      via,
      problem: { code: problem.code as 'face_too_small' | 'extreme_pose', message: problem.message },
    };
  }
}
