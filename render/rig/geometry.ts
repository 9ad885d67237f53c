/** Pure geometry on landmarks: crop regions, openness measures and head pose. No I/O. */
import type { Roi } from './image.ts';
import {
  CHIN,
  INNER_LIP_PAIRS,
  LEFT_EYE_CORNERS,
  MOUTH_CORNERS,
  RIGHT_EYE_CORNERS,
  SYMMETRIC_PAIRS,
} from './topology.ts';
import type { Box, HeadPose, Point, Point3 } from './types.ts';

/** MediaPipe crops 1.5x the face box so the whole head and some margin reach the landmark model. */
const ROI_SCALE = 1.5;

const RAD_TO_DEG = 180 / Math.PI;

function dist(a: Point, b: Point): number {
  return Math.hypot(a.x - b.x, a.y - b.y);
}

export function mean(points: readonly Point[]): Point {
  let x = 0;
  let y = 0;
  for (const p of points) {
    x += p.x;
    y += p.y;
  }
  return { x: x / points.length, y: y / points.length };
}

export function boundingBox(points: readonly Point[]): Box {
  let x0 = Infinity;
  let y0 = Infinity;
  let x1 = -Infinity;
  let y1 = -Infinity;
  for (const p of points) {
    x0 = Math.min(x0, p.x);
    y0 = Math.min(y0, p.y);
    x1 = Math.max(x1, p.x);
    y1 = Math.max(y1, p.y);
  }
  return { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
}

/**
 * Square crop around `box`, rotated so the line from `right` to `left` (the
 * subject's right and left eye) is horizontal in the crop, as MediaPipe's
 * DetectionsToRects + RectTransformation (scale 1.5, square_long) do.
 */
export function roiFromBox(box: Box, right: Point, left: Point): Roi {
  return {
    cx: box.x + box.width / 2,
    cy: box.y + box.height / 2,
    size: Math.max(box.width, box.height) * ROI_SCALE,
    angle: Math.atan2(left.y - right.y, left.x - right.x),
  };
}

/** Mean (upper, lower) gap over the corner-to-corner width; 0 when shut. */
export function opennessRatio(
  lm: readonly Point[],
  pairs: readonly (readonly [number, number])[],
  cornerA: number,
  cornerB: number,
): number {
  const width = dist(lm[cornerA]!, lm[cornerB]!);
  if (width === 0) return 0;
  let gap = 0;
  for (const [u, l] of pairs) gap += dist(lm[u]!, lm[l]!);
  return gap / pairs.length / width;
}

export function mouthOpenness(lm: readonly Point[]): number {
  return opennessRatio(lm, INNER_LIP_PAIRS, MOUTH_CORNERS.right, MOUTH_CORNERS.left);
}

type Vec3 = [number, number, number];

function sub(a: Point3, b: Point3): Vec3 {
  return [a.x - b.x, a.y - b.y, a.z - b.z];
}

function normalize(v: Vec3): Vec3 {
  const n = Math.hypot(v[0], v[1], v[2]) || 1;
  return [v[0] / n, v[1] / n, v[2] / n];
}

function cross(a: Vec3, b: Vec3): Vec3 {
  return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
}

function dot(a: Vec3, b: Vec3): number {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/**
 * Head pose from the 3D landmarks. The mesh's z is depth in the same scale as
 * x and y, so the face's own axes can be read off directly, with no camera
 * model: left-right from mirror-image point pairs (eye corners, mouth
 * corners, face edge), up-down from the outer eye corners' midpoint to the
 * chin, and the facing direction as their cross product; the angles are read
 * off that facing direction.
 *
 * Pitch zero is a convention: the chin level in depth with the outer eye
 * corners. Midline lines (nasion or forehead to chin) read 7-15 degrees
 * "down" on straight-on portrait photos in Face Mesh's depth, while this one
 * reads within ~4 degrees of zero on them (render/rig/fixtures). Treat the
 * angles as good to a few degrees near frontal: enough for pose checks, not
 * for measurement.
 */
export function headPose(lm: readonly Point3[]): HeadPose {
  let across: Vec3 = [0, 0, 0];
  for (const [r, l] of SYMMETRIC_PAIRS) {
    const d = sub(lm[l]!, lm[r]!);
    across = [across[0] + d[0], across[1] + d[1], across[2] + d[2]];
  }
  const xAxis = normalize(across); // image right for a frontal face
  const r = lm[RIGHT_EYE_CORNERS.outer]!;
  const l = lm[LEFT_EYE_CORNERS.outer]!;
  const eyes: Point3 = { x: (r.x + l.x) / 2, y: (r.y + l.y) / 2, z: (r.z + l.z) / 2 };
  let down = sub(lm[CHIN]!, eyes);
  const k = dot(down, xAxis);
  down = [down[0] - k * xAxis[0], down[1] - k * xAxis[1], down[2] - k * xAxis[2]];
  const yAxis = normalize(down); // image down for an upright face
  // x right, y down, z away from the camera: x cross y points into the face,
  // so the facing direction (towards the camera when frontal) is its negation.
  const into = cross(xAxis, yAxis);
  const facing: Vec3 = [-into[0], -into[1], -into[2]];
  return {
    yaw: Math.atan2(facing[0], -facing[2]) * RAD_TO_DEG,
    pitch: Math.atan2(-facing[1], Math.hypot(facing[0], facing[2])) * RAD_TO_DEG,
    roll: Math.atan2(xAxis[1], xAxis[0]) * RAD_TO_DEG,
  };
}
