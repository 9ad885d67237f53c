/**
 * A FaceRig from its 468 landmarks: every derived field (contours, box, eye openness, mouth
 * openness, pose) computed in one place, for detected faces (rig.ts) and for landmarks moved by
 * framing or a motion warp (render/generate).
 */
import { boundingBox, headPose, mean, mouthOpenness, opennessRatio } from './geometry.ts';
import {
  FACE_OVAL,
  LEFT_EYE,
  LEFT_EYE_CORNERS,
  LEFT_EYE_LIDS,
  LIPS_INNER,
  LIPS_OUTER,
  RIGHT_EYE,
  RIGHT_EYE_CORNERS,
  RIGHT_EYE_LIDS,
} from './topology.ts';
import type { Box, EyeRig, FaceRig, Point, Point3 } from './types.ts';

export function rigFromLandmarks(
  landmarks: Point3[],
  imageSize: { width: number; height: number },
  detection: { box: Box; score: number },
  presence: number,
): FaceRig {
  const lm = landmarks;
  const pick = (idx: readonly number[]): Point[] => idx.map((i) => ({ x: lm[i]!.x, y: lm[i]!.y }));
  const eye = (
    contour: readonly number[],
    lids: readonly (readonly [number, number])[],
    c: { outer: number; inner: number },
  ): EyeRig => {
    const pts = pick(contour);
    return { contour: pts, center: mean(pts), openness: opennessRatio(lm, lids, c.outer, c.inner) };
  };
  return {
    imageSize: { ...imageSize },
    box: boundingBox(lm),
    detection: { box: { ...detection.box }, score: detection.score },
    presence,
    landmarks: lm,
    lips: { outer: pick(LIPS_OUTER), inner: pick(LIPS_INNER) },
    eyes: {
      left: eye(LEFT_EYE, LEFT_EYE_LIDS, LEFT_EYE_CORNERS),
      right: eye(RIGHT_EYE, RIGHT_EYE_LIDS, RIGHT_EYE_CORNERS),
    },
    faceOval: pick(FACE_OVAL),
    mouthOpenness: mouthOpenness(lm),
    pose: headPose(lm),
  };
}
