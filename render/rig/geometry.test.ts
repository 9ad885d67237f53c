import { describe, expect, it } from 'vitest';
import { boundingBox, headPose, mouthOpenness, opennessRatio, roiFromBox } from './geometry.ts';
import { roiToImage } from './image.ts';
import { CHIN, INNER_LIP_PAIRS, LANDMARK_COUNT, MOUTH_CORNERS, RIGHT_EYE_LIDS, SYMMETRIC_PAIRS } from './topology.ts';
import type { Point3 } from './types.ts';

/** A symmetric synthetic face looking straight at the camera (x right, y down, z away). */
function frontalFace(): Point3[] {
  const lm: Point3[] = Array.from({ length: LANDMARK_COUNT }, () => ({ x: 0, y: 0, z: 0 }));
  const half: [number, number, number][] = [
    [45, 0, 0], // eye outer corners
    [15, 0, -5], // eye inner corners
    [25, 60, -5], // mouth corners
    [70, 5, 30], // face edge
  ];
  SYMMETRIC_PAIRS.forEach(([right, left], i) => {
    const [x, y, z] = half[i]!;
    lm[right] = { x: -x, y, z }; // subject's right is on the image's left
    lm[left] = { x, y, z };
  });
  lm[CHIN] = { x: 0, y: 100, z: 0 };
  return lm;
}

const rad = (deg: number): number => (deg * Math.PI) / 180;

/** Turn the head: pitch (nose up), then yaw (nose to image right), then roll (clockwise on screen). */
function turn(lm: Point3[], yaw: number, pitch: number, roll: number): Point3[] {
  return lm.map(({ x, y, z }) => {
    let [cy, sy] = [Math.cos(rad(pitch)), Math.sin(rad(pitch))];
    [y, z] = [y * cy + z * sy, -y * sy + z * cy];
    [cy, sy] = [Math.cos(rad(yaw)), Math.sin(rad(yaw))];
    [x, z] = [x * cy - z * sy, x * sy + z * cy];
    [cy, sy] = [Math.cos(rad(roll)), Math.sin(rad(roll))];
    [x, y] = [x * cy - y * sy, x * sy + y * cy];
    return { x: 2 * x + 300, y: 2 * y + 200, z: 2 * z }; // scale and position must not matter
  });
}

describe('headPose', () => {
  it('reads zero on a frontal face', () => {
    const p = headPose(turn(frontalFace(), 0, 0, 0));
    expect(Math.abs(p.yaw) + Math.abs(p.pitch) + Math.abs(p.roll)).toBeLessThan(1e-9);
  });

  it('recovers each axis alone, with its sign convention', () => {
    for (const deg of [-40, -15, 10, 35]) {
      expect(headPose(turn(frontalFace(), deg, 0, 0)).yaw).toBeCloseTo(deg, 6);
      expect(headPose(turn(frontalFace(), 0, deg, 0)).pitch).toBeCloseTo(deg, 6);
      expect(headPose(turn(frontalFace(), 0, 0, deg)).roll).toBeCloseTo(deg, 6);
    }
  });

  it('recovers pitch and yaw together', () => {
    const p = headPose(turn(frontalFace(), 25, -12, 0));
    expect(p.yaw).toBeCloseTo(25, 6);
    expect(p.pitch).toBeCloseTo(-12, 6);
    expect(p.roll).toBeCloseTo(0, 6);
  });
});

describe('openness', () => {
  it('is the mean lid gap over the corner-to-corner width', () => {
    const lm = frontalFace();
    // right eye: corners 33 (-45, 0) and 133 (-15, 0): width 30
    RIGHT_EYE_LIDS.forEach(([upper, lower], i) => {
      lm[upper] = { x: -30, y: -3 - i, z: 0 };
      lm[lower] = { x: -30, y: 3 + i, z: 0 };
    });
    expect(opennessRatio(lm, RIGHT_EYE_LIDS, 33, 133)).toBeCloseTo(8 / 30);
  });

  it('gives 0 for a shut mouth', () => {
    const lm = frontalFace();
    for (const [u, l] of INNER_LIP_PAIRS) {
      lm[u] = { x: 0, y: 60, z: 0 };
      lm[l] = { x: 0, y: 60, z: 0 };
    }
    expect(mouthOpenness(lm)).toBe(0);
    lm[INNER_LIP_PAIRS[1][1]] = { x: 0, y: 75, z: 0 };
    expect(mouthOpenness(lm)).toBeCloseTo(15 / 3 / 50); // one of three gaps open, width 50
    expect(lm[MOUTH_CORNERS.left]!.x - lm[MOUTH_CORNERS.right]!.x).toBe(50);
  });
});

describe('crop regions', () => {
  it('rotates the crop with the eye line and maps crop points back to the image', () => {
    const box = { x: 100, y: 50, width: 80, height: 100 };
    const roi = roiFromBox(box, { x: 120, y: 80 }, { x: 160, y: 120 }); // eye line at 45 degrees
    expect(roi.angle).toBeCloseTo(Math.PI / 4);
    expect(roi.size).toBe(150); // 1.5 x the longer side
    expect(roiToImage(roi, 0.5, 0.5)).toEqual({ x: 140, y: 100 });
    // A step right in the crop goes down-right in the image, along the eye line.
    const p = roiToImage(roi, 1, 0.5);
    expect(p.x - 140).toBeCloseTo(75 / Math.SQRT2);
    expect(p.y - 100).toBeCloseTo(75 / Math.SQRT2);
  });

  it('boxes points', () => {
    expect(
      boundingBox([
        { x: 3, y: 9 },
        { x: -1, y: 4 },
        { x: 7, y: 5 },
      ]),
    ).toEqual({ x: -1, y: 4, width: 8, height: 5 });
  });
});
