/**
 * The two resampling steps around the graph, on typed arrays: a rotated
 * square crop of an RGBA frame into a float CHW tensor, and the way back,
 * compositing the graph's output into the frame under its change mask with a
 * feathered edge. Bilinear both ways; pixel centres at integer + 0.5.
 */
import type { CropBox } from './prepare.ts';

/** An 8-bit RGBA frame, row-major, no padding. */
export interface RgbaFrame {
  width: number;
  height: number;
  data: Uint8Array | Uint8ClampedArray;
}

export function checkFrame(frame: RgbaFrame): void {
  const { width, height, data } = frame;
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) {
    throw new RangeError(`frame size must be positive integers, got ${width}x${height}`);
  }
  if (data.length !== width * height * 4) {
    throw new RangeError(`frame data has ${data.length} bytes; ${width}x${height} RGBA needs ${width * height * 4}`);
  }
}

/** Sample `box` of the frame into dst[offset .. offset + 3*S*S) as CHW floats in [0,1]. */
export function cropToTensor(frame: RgbaFrame, box: CropBox, S: number, dst: Float32Array, offset: number): void {
  const { width, height, data } = frame;
  const c = Math.cos(box.angle);
  const s = Math.sin(box.angle);
  const step = box.size / S;
  const plane = S * S;
  const maxX = width - 1;
  const maxY = height - 1;
  const k = 1 / 255;
  let o = offset;
  for (let v = 0; v < S; v++) {
    const dv = (v + 0.5) * step - box.size / 2;
    // frame position of crop pixel (0, v), in index space (centre at +0.5 removed)
    let x = box.cx - s * dv + c * (0.5 * step - box.size / 2) - 0.5;
    let y = box.cy + c * dv + s * (0.5 * step - box.size / 2) - 0.5;
    const sx = c * step;
    const sy = s * step;
    for (let u = 0; u < S; u++, o++, x += sx, y += sy) {
      const xc = x < 0 ? 0 : x > maxX ? maxX : x;
      const yc = y < 0 ? 0 : y > maxY ? maxY : y;
      const x0 = xc | 0;
      const y0 = yc | 0;
      const fx = xc - x0;
      const fy = yc - y0;
      const x1 = x0 < maxX ? x0 + 1 : x0;
      const y1 = y0 < maxY ? y0 + 1 : y0;
      const i00 = (y0 * width + x0) << 2;
      const i01 = (y0 * width + x1) << 2;
      const i10 = (y1 * width + x0) << 2;
      const i11 = (y1 * width + x1) << 2;
      const w00 = (1 - fx) * (1 - fy) * k;
      const w01 = fx * (1 - fy) * k;
      const w10 = (1 - fx) * fy * k;
      const w11 = fx * fy * k;
      dst[o] = data[i00]! * w00 + data[i01]! * w01 + data[i10]! * w10 + data[i11]! * w11;
      dst[o + plane] = data[i00 + 1]! * w00 + data[i01 + 1]! * w01 + data[i10 + 1]! * w10 + data[i11 + 1]! * w11;
      dst[o + 2 * plane] = data[i00 + 2]! * w00 + data[i01 + 2]! * w01 + data[i10 + 2]! * w10 + data[i11 + 2]! * w11;
    }
  }
}

/**
 * Fraction of the crop's side over which the composite fades in from the
 * crop's edge. The graph itself leaves a 10% border untouched, so this only
 * guards against a model (e.g. a neural one) that changes pixels up to the edge.
 */
export const FEATHER = 0.08;
/** Mask weights under this are treated as "unchanged" (keeps identity exact). */
const MIN_WEIGHT = 1 / 512;

let deltaScratch = new Float32Array(0);
function scratchDelta(n: number): Float32Array {
  if (deltaScratch.length < n) deltaScratch = new Float32Array(n);
  return deltaScratch;
}

let maskScratch = new Float32Array(0);
function scratchMask(n: number): Float32Array {
  if (maskScratch.length < n) maskScratch = new Float32Array(n);
  return maskScratch;
}

/**
 * Blend the graph's output (CHW floats at outOffset) into `target` (RGBA, the
 * frame's size) where the mask (at maskOffset) says it changed, feathered at
 * the crop's edge. Pixels outside the crop box are never written. `target`
 * may be the frame's own data (in place).
 *
 * With `detail` = { crop, keep } (the tensor the graph was given, same layout
 * as `out`, and the graph's keep plane), the change is added rather than the
 * output pasted: frame + up(mask * (out - crop)), so the frame keeps the fine
 * detail the crop's resampling lost (no softening where the skin only moves a
 * little, no jump in sharpness when speech starts). Where content moved far
 * (keep -> 0) that detail would stay behind as a ghost of the old edges, so
 * it is taken out: - up(mask * (1 - keep)) * (frame - up(crop)).
 * Without `detail`, the output replaces the frame (a neural model's new face).
 */
export function compositeFromTensor(
  frame: RgbaFrame,
  target: Uint8Array | Uint8ClampedArray,
  box: CropBox,
  S: number,
  out: Float32Array,
  outOffset: number,
  mask: Float32Array,
  maskOffset: number,
  detail?: { crop: Float32Array; cropOffset: number; keep: Float32Array; keepOffset: number },
): void {
  const { width, height, data } = frame;
  const plane = S * S;
  const maxI = S - 1;
  // The mask, feathered at the crop's edge, and the crop rows/columns where it is not zero.
  const m = scratchMask(plane);
  const feather = FEATHER * S;
  let u0min = S;
  let u0max = -1;
  let v0min = S;
  let v0max = -1;
  for (let v = 0; v < S; v++) {
    const ev = Math.min(v + 1, S - v);
    for (let u = 0; u < S; u++) {
      let w = mask[maskOffset + v * S + u]!;
      const e = Math.min(ev, u + 1, S - u);
      if (e < feather) {
        const t = e / feather;
        w *= t * t * (3 - 2 * t);
      }
      m[v * S + u] = w;
      if (w >= MIN_WEIGHT) {
        if (u < u0min) u0min = u;
        if (u > u0max) u0max = u;
        if (v < v0min) v0min = v;
        if (v > v0max) v0max = v;
      }
    }
  }
  if (u0max < 0) return; // nothing changed
  // With `detail`: the change premultiplied by the mask, in frame levels, and the weight of the
  // frame's own detail to take out, over the changed rows (every pixel read below has a masked
  // neighbour, so rows v0min-1 .. v0max+1 cover all reads).
  // Interleaved per crop pixel (7 floats): the 3 premultiplied changes, the detail-removal
  // weight, and the crop itself in frame levels.
  const d = detail ? scratchDelta(7 * plane) : undefined;
  if (d && detail) {
    const { crop, cropOffset, keep, keepOffset } = detail;
    const j0 = Math.max(0, v0min - 1) * S;
    const j1 = Math.min(S, v0max + 2) * S;
    const oR = outOffset;
    const oG = outOffset + plane;
    const oB = outOffset + 2 * plane;
    const cR = cropOffset;
    const cG = cropOffset + plane;
    const cB = cropOffset + 2 * plane;
    for (let j = j0, b = j0 * 7; j < j1; j++, b += 7) {
      const mm = m[j]! * 255;
      const r = crop[cR + j]!;
      const gg = crop[cG + j]!;
      const bb = crop[cB + j]!;
      d[b] = (out[oR + j]! - r) * mm;
      d[b + 1] = (out[oG + j]! - gg) * mm;
      d[b + 2] = (out[oB + j]! - bb) * mm;
      d[b + 3] = m[j]! * (1 - keep[keepOffset + j]!);
      d[b + 4] = r * 255;
      d[b + 5] = gg * 255;
      d[b + 6] = bb * 255;
    }
  }
  const c = Math.cos(box.angle);
  const s = Math.sin(box.angle);
  const scale = S / box.size;
  // Frame bounding box of the changed crop region (one pixel of slack for bilinear support).
  let xMin = Infinity;
  let xMax = -Infinity;
  let yMin = Infinity;
  let yMax = -Infinity;
  for (const cu of [u0min - 1, u0max + 1]) {
    for (const cv of [v0min - 1, v0max + 1]) {
      const du = (cu + 0.5 - S / 2) / scale;
      const dv = (cv + 0.5 - S / 2) / scale;
      const x = box.cx + c * du - s * dv;
      const y = box.cy + s * du + c * dv;
      xMin = Math.min(xMin, x);
      xMax = Math.max(xMax, x);
      yMin = Math.min(yMin, y);
      yMax = Math.max(yMax, y);
    }
  }
  const xStart = Math.max(0, Math.floor(xMin - 1));
  const xEnd = Math.min(width - 1, Math.ceil(xMax + 1));
  const yStart = Math.max(0, Math.floor(yMin - 1));
  const yEnd = Math.min(height - 1, Math.ceil(yMax + 1));
  const su = c * scale; // crop index step per frame pixel along x
  const sv = -s * scale;
  for (let py = yStart; py <= yEnd; py++) {
    const dy = py + 0.5 - box.cy;
    const dx0 = xStart + 0.5 - box.cx;
    let cu = (c * dx0 + s * dy) * scale + S / 2 - 0.5;
    let cv = (-s * dx0 + c * dy) * scale + S / 2 - 0.5;
    for (let px = xStart; px <= xEnd; px++, cu += su, cv += sv) {
      if (cu < -0.5 || cv < -0.5 || cu > S - 0.5 || cv > S - 0.5) continue;
      const uc = cu < 0 ? 0 : cu > maxI ? maxI : cu;
      const vc = cv < 0 ? 0 : cv > maxI ? maxI : cv;
      const u0 = uc | 0;
      const v0 = vc | 0;
      const fx = uc - u0;
      const fy = vc - v0;
      const u1 = u0 < maxI ? u0 + 1 : u0;
      const v1 = v0 < maxI ? v0 + 1 : v0;
      const j00 = v0 * S + u0;
      const j01 = v0 * S + u1;
      const j10 = v1 * S + u0;
      const j11 = v1 * S + u1;
      const w00 = (1 - fx) * (1 - fy);
      const w01 = fx * (1 - fy);
      const w10 = (1 - fx) * fy;
      const w11 = fx * fy;
      const fi = (py * width + px) << 2;
      if (d) {
        if (m[j00]! + m[j01]! + m[j10]! + m[j11]! < MIN_WEIGHT) continue;
        const a0 = j00 * 7;
        const a1 = j01 * 7;
        const a2 = j10 * 7;
        const a3 = j11 * 7;
        const drop = d[a0 + 3]! * w00 + d[a1 + 3]! * w01 + d[a2 + 3]! * w10 + d[a3 + 3]! * w11;
        for (let ch = 0; ch < 3; ch++) {
          const src = data[fi + ch]!;
          let r = src + d[a0 + ch]! * w00 + d[a1 + ch]! * w01 + d[a2 + ch]! * w10 + d[a3 + ch]! * w11;
          if (drop > MIN_WEIGHT) {
            const was = d[a0 + 4 + ch]! * w00 + d[a1 + 4 + ch]! * w01 + d[a2 + 4 + ch]! * w10 + d[a3 + 4 + ch]! * w11;
            r -= drop * (src - was);
          }
          r = Math.round(r);
          target[fi + ch] = r < 0 ? 0 : r > 255 ? 255 : r;
        }
        continue;
      }
      let a = m[j00]! * w00 + m[j01]! * w01 + m[j10]! * w10 + m[j11]! * w11;
      if (a < MIN_WEIGHT) continue;
      if (a > 1) a = 1;
      for (let ch = 0; ch < 3; ch++) {
        const base = outOffset + ch * plane;
        const val = (out[base + j00]! * w00 + out[base + j01]! * w01 + out[base + j10]! * w10 + out[base + j11]! * w11) * 255;
        const src = data[fi + ch]!;
        const r = Math.round(src + (val - src) * a);
        target[fi + ch] = r < 0 ? 0 : r > 255 ? 255 : r;
      }
    }
  }
}
