/**
 * From a face rig to the geometry the mouth synthesis needs: a square crop
 * box rotated with the mouth (corners level), sized from the face, centred a
 * little below the mouth so the jaw and chin are inside, and the key lip
 * points in crop-normalised coordinates. Pure arithmetic; no I/O.
 */
import type { FaceRig, Point } from '../rig/types.ts';
import { SYNTH_KEYPOINT_COUNT, SYNTH_KEYPOINTS } from './contract.ts';

/** A square region of the frame, rotated by `angle` radians (clockwise on screen) about its centre. */
export interface CropBox {
  cx: number;
  cy: number;
  /** Side in frame pixels. */
  size: number;
  angle: number;
}

export interface PreparedFace {
  /** The frame size the rig was measured on; frames passed with it must match. */
  imageSize: { width: number; height: number };
  box: CropBox;
  /** Crop edge in pixels fed to the graph (S). */
  cropSize: number;
  /** [SYNTH_KEYPOINT_COUNT * 2] (x, y) in [0,1] crop coordinates. */
  lips: Float32Array;
  /** Mouth width (outer corner to corner) in frame pixels. */
  mouthWidth: number;
}

export interface PrepareOptions {
  /**
   * Crop edge fed to the graph (S): the resolution of its warp field and drawn inner mouth
   * (the skin itself is always sampled from the full-resolution frame). 'auto' (the default)
   * is 3/4 of the crop's size in the frame, rounded to a multiple of 16 within
   * [MIN_AUTO_CROP, MAX_AUTO_CROP]: at 1x it looks the same as the full size and costs about
   * half as much (the graph's cost grows with S squared); a number fixes it.
   */
  cropSize?: number | 'auto';
}

const MIN_AUTO_CROP = 96;
const MAX_AUTO_CROP = 192;
/** 'auto' crop edge per frame pixel of the crop box. */
const AUTO_CROP_SCALE = 0.75;

const AUTO_CROP_STEP = 16;

export function autoCropSize(sizePx: number, scale = AUTO_CROP_SCALE): number {
  return Math.min(
    MAX_AUTO_CROP,
    Math.max(MIN_AUTO_CROP, Math.round((sizePx * scale) / AUTO_CROP_STEP) * AUTO_CROP_STEP),
  );
}

/** Every crop edge 'auto' can choose, smallest first: a graph's first run at each is slower than the next. */
export const AUTO_CROP_SIZES: readonly number[] = Array.from(
  { length: (MAX_AUTO_CROP - MIN_AUTO_CROP) / AUTO_CROP_STEP + 1 },
  (_, i) => MIN_AUTO_CROP + i * AUTO_CROP_STEP,
);

const MOUTH_RIGHT = 61;
const MOUTH_LEFT = 291;
const CHIN = 152;
const NOSE_BASE = 2;

/**
 * The crop must hold the base of the nose (the upper lip's lift fades there),
 * the chin and the part of the neck the chin slides over (0.45 mouth widths),
 * and keep a 15% margin inside each edge (the graph leaves the outer 10% alone and fades in over the next 7%).
 */
const NECK_ROOM = 0.45;
const EDGE_MARGIN = 0.15;
/** At least this many mouth widths across: the corners' and the jaw's fields fade out sideways. */
const MIN_WIDTHS = 2.4;

export function prepareFaceForSynth(rig: FaceRig, options: PrepareOptions = {}): PreparedFace {
  const choice = options.cropSize ?? 'auto';
  if (choice !== 'auto' && (!Number.isInteger(choice) || choice < 32 || choice > 512)) {
    throw new RangeError(`cropSize must be 'auto' or an integer in 32..512, got ${choice}`);
  }
  const lm = rig.landmarks;
  if (lm.length < 468) throw new RangeError(`the rig has ${lm.length} landmarks; 468 are needed`);
  const a = lm[MOUTH_RIGHT]!;
  const b = lm[MOUTH_LEFT]!;
  // Corners level; the image-left corner first, so a mirrored rig is not turned upside down.
  const [p, q] = a.x <= b.x ? [a, b] : [b, a];
  const angle = Math.atan2(q.y - p.y, q.x - p.x);
  const ex = { x: Math.cos(angle), y: Math.sin(angle) };
  const ey = { x: -ex.y, y: ex.x }; // "down" in the mouth's frame
  const W = Math.hypot(q.x - p.x, q.y - p.y);
  if (!(W > 2)) throw new RangeError('the mouth corners of the rig coincide');
  const mouth: Point = { x: (p.x + q.x) / 2, y: (p.y + q.y) / 2 };
  const down = (pt: Point): number => (pt.x - mouth.x) * ey.x + (pt.y - mouth.y) * ey.y;
  const below = Math.max(down(lm[CHIN]!), 0.6 * W) + NECK_ROOM * W; // mouth line to the bottom of what moves
  const above = Math.max(-down(lm[NOSE_BASE]!), 0.3 * W); // mouth line to the base of the nose
  const size = Math.max(MIN_WIDTHS * W, (above + below) / (1 - 2 * EDGE_MARGIN));
  const mid = (below - above) / 2; // centre of the needed span, along "down"
  const box: CropBox = { cx: mouth.x + ey.x * mid, cy: mouth.y + ey.y * mid, size, angle };
  const S = choice === 'auto' ? autoCropSize(size) : choice;

  const lips = new Float32Array(SYNTH_KEYPOINT_COUNT * 2);
  SYNTH_KEYPOINTS.forEach((idx, k) => {
    const c = toCrop(box, lm[idx]!);
    lips[k * 2] = c.x;
    lips[k * 2 + 1] = c.y;
  });
  return { imageSize: { ...rig.imageSize }, box, cropSize: S, lips, mouthWidth: W };
}

/** Frame pixel -> crop-normalised coordinates ([0,1] across the crop). */
export function toCrop(box: CropBox, pt: Point): Point {
  return toTurnedRect({ cx: box.cx, cy: box.cy, width: box.size, height: box.size, angle: box.angle }, pt);
}

/** A rectangle of the frame turned by `angle` radians (clockwise on screen) about its centre. */
export interface TurnedRect {
  cx: number;
  cy: number;
  width: number;
  height: number;
  angle: number;
}

/** Frame pixel -> coordinates normalised to the rectangle ([0,1] across it each way). */
export function toTurnedRect(rect: TurnedRect, pt: Point): Point {
  const c = Math.cos(rect.angle);
  const s = Math.sin(rect.angle);
  const dx = pt.x - rect.cx;
  const dy = pt.y - rect.cy;
  return { x: (c * dx + s * dy) / rect.width + 0.5, y: (-s * dx + c * dy) / rect.height + 0.5 };
}

/** Crop-normalised coordinates -> frame pixels. */
export function fromCrop(box: CropBox, pt: Point): Point {
  const c = Math.cos(box.angle);
  const s = Math.sin(box.angle);
  const u = (pt.x - 0.5) * box.size;
  const v = (pt.y - 0.5) * box.size;
  return { x: box.cx + c * u - s * v, y: box.cy + s * u + c * v };
}
