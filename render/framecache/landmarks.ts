/**
 * Landmarks in the frame cache's storage layout (landmarks.f32, see format.ts): one flat
 * Float32Array of x, y, z per point, frame pixels.
 */
import type { Point3 } from '../rig/types.ts';

/** Landmarks as a flat Float32Array (x, y, z per point). */
export function packLandmarks(lm: readonly Point3[], out = new Float32Array(lm.length * 3)): Float32Array {
  for (let i = 0; i < lm.length; i++) {
    const p = lm[i]!;
    out[i * 3] = p.x;
    out[i * 3 + 1] = p.y;
    out[i * 3 + 2] = p.z;
  }
  return out;
}

/** The points of a packed landmark array (a trailing partial point is dropped). */
export function unpackLandmarks(data: Float32Array): Point3[] {
  const out: Point3[] = [];
  for (let i = 0; i + 2 < data.length; i += 3) out.push({ x: data[i]!, y: data[i + 1]!, z: data[i + 2]! });
  return out;
}
