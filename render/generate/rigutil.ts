/**
 * A FaceRig rebuilt from moved landmarks (after framing or a motion warp), with every
 * derived field (contours, box, openness, pose) recomputed the way render/rig computes them.
 */
import { boundingBox, headPose, mean, mouthOpenness, opennessRatio } from '../rig/geometry.ts';
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
} from '../rig/topology.ts';
import type { Box, EyeRig, FaceRig, Point, Point3 } from '../rig/types.ts';

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

/** Landmarks as a flat Float32Array (x, y, z per point), the frame cache's storage layout. */
export function packLandmarks(lm: readonly Point3[], out = new Float32Array(lm.length * 3)): Float32Array {
  for (let i = 0; i < lm.length; i++) {
    const p = lm[i]!;
    out[i * 3] = p.x;
    out[i * 3 + 1] = p.y;
    out[i * 3 + 2] = p.z;
  }
  return out;
}

export function unpackLandmarks(data: Float32Array): Point3[] {
  const out: Point3[] = [];
  for (let i = 0; i + 2 < data.length; i += 3) out.push({ x: data[i]!, y: data[i + 1]!, z: data[i + 2]! });
  return out;
}
