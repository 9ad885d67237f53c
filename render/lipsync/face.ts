/**
 * The face crop a Wav2Lip-class model was trained on, emulated from the rig's Face Mesh landmarks,
 * and the way its output goes back into the frame.
 *
 * Wav2Lip's pipeline crops each frame to its S3FD face box (about the brows to the chin, cheek to
 * cheek) with pads of 0 above and 10 px below the chin, and resizes that box to H x H without
 * keeping its aspect. Here: across, the face oval's extremes (landmarks 234 and 454); down, from
 * just above the brows to the chin plus NEURAL_CROP_PADS.bottom of the face's height; the box turned
 * with the eye line, resized to H x H (non-square, as Wav2Lip's is).
 *
 * The output replaces the frame only under a feathered mask of the lower face: below the top of
 * the half the model was given masked (rows H/2 and down, fading in over NEURAL_MASK.fade), inside
 * the jaw line (the face oval from ear to ear through the chin, feathered across it), and fading to
 * nothing before the crop's edges. Pixels where the mask is 0 are never written: no box shows
 * around the mouth, and nothing outside the lower face changes.
 *
 * Sampling is bilinear both ways; pixel centres at integer + 0.5. Frames are RGBA or I420 (BT.601
 * studio range, as render/encode converts).
 */
import type { I420Frame, RgbaFrame } from '../synth/image.ts';
import type { FaceRig, Point } from '../rig/types.ts';
import { toTurnedRect as toRect, type TurnedRect } from '../synth/prepare.ts';
import { FACE_OVAL } from '../rig/topology.ts';
import type { PixelRect } from '../encode/frames.ts';

/** The crop: a rectangle of the frame turned with the face; `width` runs along its eye line. */
export type FaceRect = TurnedRect;

export interface NeuralFace {
  kind: 'neural';
  /** The frame size the rig was measured on; frames passed with it must match. */
  imageSize: { width: number; height: number };
  /** The crop, resized to the model's H x H. */
  rect: FaceRect;
  /** The blend mask over the crop, NEURAL_MASK.grid x NEURAL_MASK.grid cells (row-major, 0..255). */
  mask: Uint8Array;
}

/**
 * Wav2Lip's pads, as fractions of the face's height (the brows' top to the chin): the crop starts
 * `top` above the brows (an S3FD box's top edge sits just above them; Wav2Lip pads it by 0) and
 * ends `bottom` below the chin (Wav2Lip's 10 px below the box, about 5% of a face in its training
 * videos). Across, the oval's extremes, unpadded (Wav2Lip's side pads are 0).
 */
const NEURAL_CROP_PADS = { top: 0.04, bottom: 0.05 } as const;

/**
 * The blend mask: `grid` cells a side over the crop; the upper edge fades in from the crop's middle
 * (the top of the masked half) over `fade` of its height; across the jaw line it goes from 0 at
 * `outside` beyond it to 1 at `inside` within it (in crop heights: the chin may drop a little when
 * the mouth opens); and it falls to 0 over `edge` of the crop towards each of its sides.
 */
export const NEURAL_MASK = { grid: 64, fade: 0.1, outside: 0.03, inside: 0.05, edge: 0.06 } as const;

/** The brows' upper edges (MediaPipe Face Mesh), subject's right then left. */
const BROWS = [70, 63, 105, 66, 107, 336, 296, 334, 293, 300] as const;
const FACE_RIGHT = 234;
const FACE_LEFT = 454;
const CHIN = 152;

function smoothstep(e0: number, e1: number, x: number): number {
  const t = Math.min(1, Math.max(0, (x - e0) / (e1 - e0)));
  return t * t * (3 - 2 * t);
}

/** The crop and blend mask of a Wav2Lip-class model for frames measured by `rig`. */
export function prepareFaceForNeural(rig: FaceRig): NeuralFace {
  const lm = rig.landmarks;
  if (lm.length < 468) throw new RangeError(`the rig has ${lm.length} landmarks; 468 are needed`);
  const r = rig.eyes.right.center;
  const l = rig.eyes.left.center;
  // The image-left eye first, so a mirrored rig is not turned upside down.
  const [p, q] = r.x <= l.x ? [r, l] : [l, r];
  const angle = Math.atan2(q.y - p.y, q.x - p.x);
  const c = Math.cos(angle);
  const s = Math.sin(angle);
  const o = { x: (lm[FACE_RIGHT]!.x + lm[FACE_LEFT]!.x) / 2, y: (lm[FACE_RIGHT]!.y + lm[FACE_LEFT]!.y) / 2 };
  const across = (pt: Point) => (pt.x - o.x) * c + (pt.y - o.y) * s;
  const down = (pt: Point) => -(pt.x - o.x) * s + (pt.y - o.y) * c;
  const x0 = Math.min(across(lm[FACE_RIGHT]!), across(lm[FACE_LEFT]!));
  const x1 = Math.max(across(lm[FACE_RIGHT]!), across(lm[FACE_LEFT]!));
  const brows = Math.min(...BROWS.map((i) => down(lm[i]!)));
  const chin = down(lm[CHIN]!);
  const faceHeight = chin - brows;
  if (!(x1 - x0 > 4) || !(faceHeight > 4))
    throw new RangeError("the rig's face is too small or degenerate for a neural lip-sync crop");
  const y0 = brows - NEURAL_CROP_PADS.top * faceHeight;
  const y1 = chin + NEURAL_CROP_PADS.bottom * faceHeight;
  const mx = (x0 + x1) / 2;
  const my = (y0 + y1) / 2;
  const rect: FaceRect = {
    cx: o.x + c * mx - s * my,
    cy: o.y + s * mx + c * my,
    width: x1 - x0,
    height: y1 - y0,
    angle,
  };
  return { kind: 'neural', imageSize: { ...rig.imageSize }, rect, mask: lowerFaceMask(rect, lm) };
}

/**
 * The blend mask of NEURAL_MASK over `rect`. The jaw line is the face oval from one extreme (454)
 * through the chin to the other (234), closed straight across above the mask's upper fade.
 */
function lowerFaceMask(rect: FaceRect, lm: readonly Point[]): Uint8Array {
  const from = FACE_OVAL.indexOf(FACE_LEFT);
  const to = FACE_OVAL.indexOf(FACE_RIGHT);
  const aspect = rect.width / rect.height;
  // In crop heights both ways, so the feather is as wide across as down.
  const jaw = FACE_OVAL.slice(from, to + 1).map((i) => {
    const pt = toRect(rect, lm[i]!);
    return { x: pt.x * aspect, y: pt.y };
  });
  const G = NEURAL_MASK.grid;
  const mask = new Uint8Array(G * G);
  for (let j = 0; j < G; j++) {
    const v = (j + 0.5) / G;
    const top = smoothstep(0.5, 0.5 + NEURAL_MASK.fade, v);
    if (top === 0) continue;
    for (let i = 0; i < G; i++) {
      const u = (i + 0.5) / G;
      const edge = smoothstep(1 / G, NEURAL_MASK.edge, Math.min(u, 1 - u, v, 1 - v));
      if (edge === 0) continue;
      const inside = smoothstep(-NEURAL_MASK.outside, NEURAL_MASK.inside, signedDistance(jaw, u * aspect, v));
      mask[j * G + i] = Math.round(255 * top * edge * inside);
    }
  }
  return mask;
}

/** Distance from (x, y) to the closed polygon `poly`'s edge: positive inside, negative outside. */
function signedDistance(poly: readonly Point[], x: number, y: number): number {
  let d2 = Infinity;
  let inside = false;
  for (let k = 0, m = poly.length - 1; k < poly.length; m = k++) {
    const a = poly[m]!;
    const b = poly[k]!;
    if (a.y > y !== b.y > y && x < ((b.x - a.x) * (y - a.y)) / (b.y - a.y) + a.x) inside = !inside;
    const ex = b.x - a.x;
    const ey = b.y - a.y;
    const t = Math.min(1, Math.max(0, ((x - a.x) * ex + (y - a.y) * ey) / (ex * ex + ey * ey || 1)));
    const dx = x - (a.x + t * ex);
    const dy = y - (a.y + t * ey);
    d2 = Math.min(d2, dx * dx + dy * dy);
  }
  return inside ? Math.sqrt(d2) : -Math.sqrt(d2);
}

/** The frame pixels a neural face's crop covers (its turned rectangle's bounding box, and the bilinear taps around it). */
export function faceRectBounds(rect: FaceRect): PixelRect {
  const c = Math.abs(Math.cos(rect.angle));
  const s = Math.abs(Math.sin(rect.angle));
  const hw = (rect.width / 2) * c + (rect.height / 2) * s + 2;
  const hh = (rect.width / 2) * s + (rect.height / 2) * c + 2;
  return { x: rect.cx - hw, y: rect.cy - hh, width: 2 * hw, height: 2 * hh };
}

/** A frame read at a point (pixel centres at +0.5), bilinear, as R, G, B in 0..255 into `rgb`. */
export type PixelSampler = (x: number, y: number, rgb: Float64Array) => void;

export function rgbaSampler(frame: RgbaFrame): PixelSampler {
  const { width, height, data } = frame;
  const pitch = width * 4;
  return (x, y, rgb) => {
    for (let ch = 0; ch < 3; ch++) rgb[ch] = bilinear(data, ch, 4, pitch, width, height, x - 0.5, y - 0.5);
  };
}

/**
 * Bilinear in a plane of w x h samples from `base`, `step` apart along a row and `pitch` apart down
 * a column (index space: the first sample's centre at 0; clamped at the edges).
 */
function bilinear(
  data: ArrayLike<number>,
  base: number,
  step: number,
  pitch: number,
  w: number,
  h: number,
  x: number,
  y: number,
): number {
  const xc = x <= 0 ? 0 : x >= w - 1 ? w - 1 : x;
  const yc = y <= 0 ? 0 : y >= h - 1 ? h - 1 : y;
  const x0 = xc | 0;
  const y0 = yc | 0;
  const fx = xc - x0;
  const fy = yc - y0;
  const i = base + y0 * pitch + x0 * step;
  const dx = x0 < w - 1 ? step : 0;
  const dy = y0 < h - 1 ? pitch : 0;
  const top = data[i]! + (data[i + dx]! - data[i]!) * fx;
  const bottom = data[i + dy]! + (data[i + dy + dx]! - data[i + dy]!) * fx;
  return top + (bottom - top) * fy;
}

export function i420Sampler(frame: I420Frame): PixelSampler {
  const { width, height, data } = frame;
  const cw = (width + 1) >> 1;
  const chh = (height + 1) >> 1;
  const uBase = width * height;
  const vBase = uBase + cw * chh;
  return (x, y, rgb) => {
    const l = (298 / 256) * (bilinear(data, 0, 1, width, width, height, x - 0.5, y - 0.5) - 16);
    // A chroma sample's centre is the centre of its 2x2 block of pixels.
    const cu = bilinear(data, uBase, 1, cw, cw, chh, x / 2 - 0.5, y / 2 - 0.5) - 128;
    const cv = bilinear(data, vBase, 1, cw, cw, chh, x / 2 - 0.5, y / 2 - 0.5) - 128;
    rgb[0] = Math.min(255, Math.max(0, l + (409 / 256) * cv));
    rgb[1] = Math.min(255, Math.max(0, l - (100 / 256) * cu - (208 / 256) * cv));
    rgb[2] = Math.min(255, Math.max(0, l + (516 / 256) * cu));
  };
}

/** Crop `rect` of a frame into dst[offset ..) as three S x S planes B, G, R in [0, 1] (Wav2Lip's order). */
export function cropFace(sample: PixelSampler, rect: FaceRect, S: number, dst: Float32Array, offset: number): void {
  const c = Math.cos(rect.angle);
  const s = Math.sin(rect.angle);
  const plane = S * S;
  const rgb = new Float64Array(3);
  for (let v = 0; v < S; v++) {
    const dv = ((v + 0.5) / S - 0.5) * rect.height;
    for (let u = 0; u < S; u++) {
      const du = ((u + 0.5) / S - 0.5) * rect.width;
      sample(rect.cx + c * du - s * dv, rect.cy + s * du + c * dv, rgb);
      const o = offset + v * S + u;
      dst[o] = rgb[2]! / 255;
      dst[o + plane] = rgb[1]! / 255;
      dst[o + 2 * plane] = rgb[0]! / 255;
    }
  }
}

/**
 * A model's output face (three S x S planes B, G, R in [0, 1] from `offset`) under a face's mask:
 * `each` calls `draw(index, rgb, weight)` for every cell of a grid laid over the frame (`pitch`
 * frame pixels a cell: 1 for pixels, 2 for I420 chroma; `cols` x `rows` cells) whose centre the mask
 * covers, with the output's R, G, B (0..255) there and the mask's weight in (0, 1].
 */
function eachMasked(
  face: NeuralFace,
  out: Float32Array,
  offset: number,
  S: number,
  grid: { cols: number; rows: number; pitch: number },
  draw: (index: number, rgb: Float64Array, weight: number) => void,
): void {
  const { rect, mask } = face;
  const G = NEURAL_MASK.grid;
  const { cols, rows, pitch } = grid;
  const b = faceRectBounds(rect);
  const c0 = Math.max(0, Math.floor(b.x / pitch));
  const c1 = Math.min(cols - 1, Math.ceil((b.x + b.width) / pitch));
  const r0 = Math.max(0, Math.floor(b.y / pitch));
  const r1 = Math.min(rows - 1, Math.ceil((b.y + b.height) / pitch));
  const c = Math.cos(rect.angle);
  const s = Math.sin(rect.angle);
  // Crop-normalised coordinates per grid step along a row.
  const du = (c * pitch) / rect.width;
  const dv = (-s * pitch) / rect.height;
  const plane = S * S;
  const rgb = new Float64Array(3);
  for (let row = r0; row <= r1; row++) {
    const dy = (row + 0.5) * pitch - rect.cy;
    const dx = (c0 + 0.5) * pitch - rect.cx;
    let u = (c * dx + s * dy) / rect.width + 0.5;
    let v = (-s * dx + c * dy) / rect.height + 0.5;
    for (let col = c0; col <= c1; col++, u += du, v += dv) {
      if (!(u > 0 && u < 1 && v > 0 && v < 1)) continue;
      const weight = bilinear(mask, 0, 1, G, G, G, u * G - 0.5, v * G - 0.5) / 255;
      if (weight <= 0) continue;
      const x = u * S - 0.5;
      const y = v * S - 0.5;
      rgb[0] = bilinear(out, offset + 2 * plane, 1, S, S, S, x, y) * 255;
      rgb[1] = bilinear(out, offset + plane, 1, S, S, S, x, y) * 255;
      rgb[2] = bilinear(out, offset, 1, S, S, S, x, y) * 255;
      draw(row * cols + col, rgb, Math.min(1, weight));
    }
  }
}

const clampByte = (x: number) => (x <= 0 ? 0 : x >= 255 ? 255 : Math.round(x));

/** The output face into `target` (RGBA, the frame's size) under the face's mask; other pixels are left as they are. `target` may be the frame's own data. */
export function pasteFaceRgba(
  frame: RgbaFrame,
  target: Uint8Array | Uint8ClampedArray,
  face: NeuralFace,
  out: Float32Array,
  offset: number,
  S: number,
): void {
  const { data, width, height } = frame;
  eachMasked(face, out, offset, S, { cols: width, rows: height, pitch: 1 }, (i, rgb, a) => {
    const p = i << 2;
    for (let ch = 0; ch < 3; ch++) target[p + ch] = clampByte(data[p + ch]! + (rgb[ch]! - data[p + ch]!) * a);
  });
}

/** The output face into an I420 frame, in place, under the face's mask: luma per pixel, chroma per 2x2 block; nothing else is written. */
export function pasteFaceI420(frame: I420Frame, face: NeuralFace, out: Float32Array, offset: number, S: number): void {
  const { data, width, height } = frame;
  const cw = (width + 1) >> 1;
  const uBase = width * height;
  const vBase = uBase + cw * ((height + 1) >> 1);
  eachMasked(face, out, offset, S, { cols: width, rows: height, pitch: 1 }, (i, rgb, a) => {
    const y = (66 * rgb[0]! + 129 * rgb[1]! + 25 * rgb[2]!) / 256 + 16;
    data[i] = clampByte(data[i]! + (y - data[i]!) * a);
  });
  eachMasked(face, out, offset, S, { cols: cw, rows: (height + 1) >> 1, pitch: 2 }, (i, rgb, a) => {
    const [r, g, b] = [rgb[0]!, rgb[1]!, rgb[2]!];
    const u = (-38 * r - 74 * g + 112 * b) / 256 + 128;
    const v = (112 * r - 94 * g - 18 * b) / 256 + 128;
    data[uBase + i] = clampByte(data[uBase + i]! + (u - data[uBase + i]!) * a);
    data[vBase + i] = clampByte(data[vBase + i]! + (v - data[vBase + i]!) * a);
  });
}
