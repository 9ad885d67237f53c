/**
 * The rig on real photographs (render/rig/fixtures, see SOURCES.md): where
 * things land, and that the mapping back to image pixels survives flips,
 * rotation, scaling, padding, greyscale and EXIF orientation.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { detectFaceRig, topology } from './index.ts';
import type { Box, FaceRig, Point } from './index.ts';

const fixture = (name: string): string => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const ASTRONAUT = fixture('astronaut.jpg'); // Eileen Collins, NASA portrait, smiling with teeth
const HOPPER = fixture('grace_hopper.jpg'); // Grace Hopper, US Navy portrait, mouth closed, glasses

// The shared machine may be busy; the first call also loads both models.
const SLOW = { timeout: 60_000 };

const inside = (p: Point, b: Box, margin = 0): boolean =>
  p.x >= b.x - margin && p.x <= b.x + b.width + margin && p.y >= b.y - margin && p.y <= b.y + b.height + margin;

const centre = (b: Box): Point => ({ x: b.x + b.width / 2, y: b.y + b.height / 2 });

/** Mean distance between corresponding landmarks, as a fraction of the face size. */
function landmarkError(a: FaceRig, b: FaceRig, map: (p: Point) => Point = (p) => p): number {
  let sum = 0;
  a.landmarks.forEach((p, i) => {
    const q = map(b.landmarks[i]!);
    sum += Math.hypot(p.x - q.x, p.y - q.y);
  });
  return sum / a.landmarks.length / Math.max(a.box.width, a.box.height);
}

function expectSaneFrontalRig(rig: FaceRig, width: number, height: number): void {
  expect(rig.imageSize).toEqual({ width, height });
  expect(rig.landmarks).toHaveLength(topology.LANDMARK_COUNT);
  for (const p of rig.landmarks) {
    expect(Number.isFinite(p.x) && Number.isFinite(p.y) && Number.isFinite(p.z)).toBe(true);
  }
  expect(rig.detection.score).toBeGreaterThan(0.8);
  expect(rig.presence).toBeGreaterThan(0.9);

  // The box is a face-sized region inside the image, around the detector's box.
  const { box } = rig;
  expect(box.x).toBeGreaterThanOrEqual(0);
  expect(box.y).toBeGreaterThanOrEqual(0);
  expect(box.x + box.width).toBeLessThanOrEqual(width);
  expect(box.y + box.height).toBeLessThanOrEqual(height);
  expect(box.width).toBeGreaterThan(0.1 * width);
  expect(box.width).toBeLessThan(0.6 * width);
  expect(box.height / box.width).toBeGreaterThan(0.9); // faces are taller than wide
  expect(box.height / box.width).toBeLessThan(1.5);
  expect(inside(centre(rig.detection.box), box)).toBe(true);

  // Mouth and eyes inside the face box; eyes above the lips, the subject's left eye on the image's right.
  const features = [...rig.lips.outer, ...rig.lips.inner, ...rig.eyes.left.contour, ...rig.eyes.right.contour];
  for (const p of features) expect(inside(p, box)).toBe(true);
  const lipsTop = Math.min(...rig.lips.outer.map((p) => p.y));
  expect(Math.max(...rig.eyes.left.contour.map((p) => p.y))).toBeLessThan(lipsTop);
  expect(Math.max(...rig.eyes.right.contour.map((p) => p.y))).toBeLessThan(lipsTop);
  expect(rig.eyes.left.center.x).toBeGreaterThan(rig.eyes.right.center.x);
  const mouthX = (Math.min(...rig.lips.outer.map((p) => p.x)) + Math.max(...rig.lips.outer.map((p) => p.x))) / 2;
  expect(mouthX).toBeGreaterThan(rig.eyes.right.center.x);
  expect(mouthX).toBeLessThan(rig.eyes.left.center.x);
  // Inner lip line lies within the outer one's vertical span.
  const outerBottom = Math.max(...rig.lips.outer.map((p) => p.y));
  for (const p of rig.lips.inner) expect(p.y).toBeGreaterThanOrEqual(lipsTop - 1);
  for (const p of rig.lips.inner) expect(p.y).toBeLessThanOrEqual(outerBottom + 1);

  // Both portraits look into the camera with open eyes.
  expect(Math.abs(rig.pose.yaw)).toBeLessThan(10);
  expect(Math.abs(rig.pose.pitch)).toBeLessThan(10);
  expect(Math.abs(rig.pose.roll)).toBeLessThan(10);
  expect(rig.eyes.left.openness).toBeGreaterThan(0.18);
  expect(rig.eyes.right.openness).toBeGreaterThan(0.18);
  expect(rig.eyes.left.openness).toBeLessThan(0.5);
}

describe('detectFaceRig on real portraits', () => {
  it('rigs the astronaut portrait (from a path)', SLOW, async () => {
    const rig = await detectFaceRig(ASTRONAUT);
    expectSaneFrontalRig(rig, 512, 512);
    // Her face is in the upper middle of the frame (about x 180-272, y 70-177 in this 512 px copy).
    expect(inside(centre(rig.box), { x: 190, y: 90, width: 70, height: 70 })).toBe(true);
    // She smiles with her teeth showing: the inner lips are apart.
    expect(rig.mouthOpenness).toBeGreaterThan(0.08);
  });

  it('rigs the Grace Hopper portrait (from a buffer)', SLOW, async () => {
    const rig = await detectFaceRig(readFileSync(HOPPER));
    expectSaneFrontalRig(rig, 437, 512);
    expect(inside(centre(rig.box), { x: 180, y: 160, width: 90, height: 90 })).toBe(true);
    // Mouth closed.
    expect(rig.mouthOpenness).toBeLessThan(0.08);
  });

  it('gives mirrored results on a mirrored photo', SLOW, async () => {
    const rig = await detectFaceRig(ASTRONAUT);
    const flipped = await detectFaceRig(await sharp(ASTRONAUT).flop().png().toBuffer());
    const W = 512;
    // The flip swaps the subject's sides: flipped left eye = mirror of original right eye.
    expect(Math.abs(flipped.eyes.left.center.x - (W - rig.eyes.right.center.x))).toBeLessThan(3);
    expect(Math.abs(flipped.eyes.left.center.y - rig.eyes.right.center.y)).toBeLessThan(3);
    expect(Math.abs(flipped.box.x - (W - rig.box.x - rig.box.width))).toBeLessThan(4);
    // Yaw and roll change sign, pitch does not (measured: within 1 degree).
    expect(Math.abs(flipped.pose.yaw + rig.pose.yaw)).toBeLessThan(3);
    expect(Math.abs(flipped.pose.roll + rig.pose.roll)).toBeLessThan(3);
    expect(Math.abs(flipped.pose.pitch - rig.pose.pitch)).toBeLessThan(3);
  });

  it('measures roll on a rotated photo', SLOW, async () => {
    const rig = await detectFaceRig(HOPPER);
    // sharp rotates clockwise for positive angles: the head tilts clockwise in the image.
    const rotated = await detectFaceRig(await sharp(HOPPER).rotate(20, { background: '#808080' }).png().toBuffer());
    expect(rotated.pose.roll - rig.pose.roll).toBeGreaterThan(16);
    expect(rotated.pose.roll - rig.pose.roll).toBeLessThan(24);
    expect(Math.abs(rotated.pose.yaw - rig.pose.yaw)).toBeLessThan(5);
  });

  it('maps landmarks back to pixels at any scale and with padding', SLOW, async () => {
    const rig = await detectFaceRig(HOPPER);
    // 3x: the face is large enough that the crop is reduced before sampling.
    const big = await detectFaceRig(
      await sharp(HOPPER)
        .resize(437 * 3)
        .png()
        .toBuffer(),
    );
    expect(big.imageSize.width).toBe(437 * 3);
    expect(landmarkError(rig, big, (p) => ({ x: p.x / 3, y: p.y / 3 }))).toBeLessThan(0.015);
    // Wide canvas, face off-centre: exercises the letterbox offsets.
    const padded = await detectFaceRig(
      await sharp(HOPPER).extend({ left: 300, right: 60, background: '#204060' }).png().toBuffer(),
    );
    expect(landmarkError(rig, padded, (p) => ({ x: p.x - 300, y: p.y }))).toBeLessThan(0.015);
  });

  it('accepts greyscale with alpha, and honours EXIF orientation', SLOW, async () => {
    const rig = await detectFaceRig(ASTRONAUT);
    const grey = await detectFaceRig(await sharp(ASTRONAUT).grayscale().ensureAlpha(0.9).png().toBuffer());
    expect(landmarkError(rig, grey)).toBeLessThan(0.02);
    // Pixels stored turned a quarter left, with EXIF orientation 6 ("turn right to view").
    const sideways = await sharp(await sharp(ASTRONAUT).rotate(-90).toBuffer())
      .withMetadata({ orientation: 6 })
      .jpeg()
      .toBuffer();
    const oriented = await detectFaceRig(sideways);
    expect(oriented.imageSize).toEqual({ width: 512, height: 512 });
    expect(landmarkError(rig, oriented)).toBeLessThan(0.02);
  });

  it('serves concurrent callers from one set of sessions', SLOW, async () => {
    const rigs = await Promise.all([detectFaceRig(ASTRONAUT), detectFaceRig(HOPPER), detectFaceRig(ASTRONAUT)]);
    expect(landmarkError(rigs[0]!, rigs[2]!)).toBe(0);
    expect(rigs[1]!.imageSize.width).toBe(437);
  });
});
