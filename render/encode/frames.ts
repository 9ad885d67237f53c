/**
 * RGBA <-> I420 for WebRTC (LiveKit VideoFrame, VideoBufferType.I420) and the i420 mux codec.
 *
 * BT.601, limited ("studio", "TV") range: Y in [16, 235], U and V in [16, 240], what WebRTC and
 * libyuv assume for I420. The fixed-point coefficients are libyuv's (RGBToY, RGBToU, RGBToV,
 * I420ToARGB), so frames match what the WebRTC stack itself would produce.
 *
 * Layout of an I420 buffer: Y plane (width x height), then U, then V (each ceil(w/2) x ceil(h/2)),
 * tightly packed. Odd sizes are allowed: the last chroma column/row covers one pixel.
 *
 * Written for speed: one pass, two rows at a time, no allocation besides the optional output.
 */
import { i420Size } from '../../client/format.ts';

export { i420Size };

export interface I420Planes {
  y: Uint8Array;
  u: Uint8Array;
  v: Uint8Array;
  /** Row strides in bytes: width for Y, ceil(width/2) for U and V. */
  strideY: number;
  strideUV: number;
  chromaWidth: number;
  chromaHeight: number;
}

/** Views of the three planes of a packed I420 buffer (no copy). */
export function i420Planes(data: Uint8Array, width: number, height: number): I420Planes {
  checkSize(data.length, i420Size(width, height), 'I420', width, height);
  const cw = (width + 1) >> 1;
  const ch = (height + 1) >> 1;
  const ySize = width * height;
  return {
    y: data.subarray(0, ySize),
    u: data.subarray(ySize, ySize + cw * ch),
    v: data.subarray(ySize + cw * ch, ySize + 2 * cw * ch),
    strideY: width,
    strideUV: cw,
    chromaWidth: cw,
    chromaHeight: ch,
  };
}

function checkSize(got: number, want: number, what: string, width: number, height: number): void {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) {
    throw new RangeError(`frames: invalid size ${width}x${height}`);
  }
  if (got !== want)
    throw new RangeError(`frames: ${what} buffer of ${got} bytes, expected ${want} for ${width}x${height}`);
}

/** A rectangle of a frame, in pixels. */
export interface PixelRect {
  x: number;
  y: number;
  width: number;
  height: number;
}

/**
 * The rectangle widened to even coordinates (whole chroma samples) and clipped to the frame: what
 * the rect conversions below touch. Empty (width or height 0) when it misses the frame.
 */
export function chromaAligned(rect: PixelRect, width: number, height: number): PixelRect {
  const x0 = Math.max(0, Math.floor(rect.x) & ~1);
  const y0 = Math.max(0, Math.floor(rect.y) & ~1);
  const x1 = Math.min(width, (Math.ceil(rect.x + rect.width) + 1) & ~1);
  const y1 = Math.min(height, (Math.ceil(rect.y + rect.height) + 1) & ~1);
  return { x: x0, y: y0, width: Math.max(0, x1 - x0), height: Math.max(0, y1 - y0) };
}

/**
 * RGBA (8 bits per channel, tightly packed, alpha ignored) to I420. Chroma is the 2x2 average.
 * Writes into `out` when given (length i420Size(width, height)), else allocates.
 */
export function rgbaToI420(
  rgba: Uint8Array | Uint8ClampedArray,
  width: number,
  height: number,
  out?: Uint8Array,
): Uint8Array {
  checkSize(rgba.length, width * height * 4, 'RGBA', width, height);
  const size = i420Size(width, height);
  const dst = out ?? new Uint8Array(size);
  checkSize(dst.length, size, 'I420 output', width, height);
  convertRgbaToI420(rgba, width, height, dst, 0, 0, width, height);
  return dst;
}

/**
 * Converts the pixels of `rect` (widened to whole chroma samples, chromaAligned) of a full RGBA
 * frame into the same place of a full I420 frame; the rest of `i420` is left as it is.
 */
export function rgbaRectToI420(
  rgba: Uint8Array | Uint8ClampedArray,
  width: number,
  height: number,
  rect: PixelRect,
  i420: Uint8Array,
): void {
  checkSize(rgba.length, width * height * 4, 'RGBA', width, height);
  checkSize(i420.length, i420Size(width, height), 'I420 output', width, height);
  const r = chromaAligned(rect, width, height);
  if (r.width > 0 && r.height > 0)
    convertRgbaToI420(rgba, width, height, i420, r.x, r.y, r.x + r.width, r.y + r.height);
}

/** Columns [x0, x1) and rows [y0, y1) of a frame; x0 and y0 even. */
function convertRgbaToI420(
  src: Uint8Array | Uint8ClampedArray,
  width: number,
  height: number,
  dst: Uint8Array,
  x0: number,
  y0: number,
  x1: number,
  y1: number,
): void {
  const cw = (width + 1) >> 1;
  const ch = (height + 1) >> 1;
  const uBase = width * height;
  const vBase = uBase + cw * ch;
  const evenX1 = x1 & ~1;

  for (let cy = y0 >> 1; cy < (y1 + 1) >> 1; cy++) {
    const ya = cy << 1;
    const yb = ya + 1 < height ? ya + 1 : ya;
    let s0 = (ya * width + x0) * 4;
    let s1 = (yb * width + x0) * 4;
    let d0 = ya * width + x0;
    let d1 = yb * width + x0;
    let c = uBase + cy * cw + (x0 >> 1);
    let cv = vBase + cy * cw + (x0 >> 1);
    // Pairs of columns.
    for (let x = x0; x < evenX1; x += 2) {
      const r00 = src[s0]!,
        g00 = src[s0 + 1]!,
        b00 = src[s0 + 2]!;
      const r01 = src[s0 + 4]!,
        g01 = src[s0 + 5]!,
        b01 = src[s0 + 6]!;
      const r10 = src[s1]!,
        g10 = src[s1 + 1]!,
        b10 = src[s1 + 2]!;
      const r11 = src[s1 + 4]!,
        g11 = src[s1 + 5]!,
        b11 = src[s1 + 6]!;
      dst[d0] = (66 * r00 + 129 * g00 + 25 * b00 + 0x1080) >> 8;
      dst[d0 + 1] = (66 * r01 + 129 * g01 + 25 * b01 + 0x1080) >> 8;
      dst[d1] = (66 * r10 + 129 * g10 + 25 * b10 + 0x1080) >> 8;
      dst[d1 + 1] = (66 * r11 + 129 * g11 + 25 * b11 + 0x1080) >> 8;
      const r = (r00 + r01 + r10 + r11 + 2) >> 2;
      const g = (g00 + g01 + g10 + g11 + 2) >> 2;
      const b = (b00 + b01 + b10 + b11 + 2) >> 2;
      dst[c++] = (112 * b - 74 * g - 38 * r + 0x8080) >> 8;
      dst[cv++] = (112 * r - 94 * g - 18 * b + 0x8080) >> 8;
      s0 += 8;
      s1 += 8;
      d0 += 2;
      d1 += 2;
    }
    if (evenX1 !== x1) {
      // Last, single column (of an odd-width frame).
      const r0 = src[s0]!,
        g0 = src[s0 + 1]!,
        b0 = src[s0 + 2]!;
      const r1 = src[s1]!,
        g1 = src[s1 + 1]!,
        b1 = src[s1 + 2]!;
      dst[d0] = (66 * r0 + 129 * g0 + 25 * b0 + 0x1080) >> 8;
      dst[d1] = (66 * r1 + 129 * g1 + 25 * b1 + 0x1080) >> 8;
      const r = (r0 + r1 + 1) >> 1;
      const g = (g0 + g1 + 1) >> 1;
      const b = (b0 + b1 + 1) >> 1;
      dst[c] = (112 * b - 74 * g - 38 * r + 0x8080) >> 8;
      dst[cv] = (112 * r - 94 * g - 18 * b + 0x8080) >> 8;
    }
  }
}

/**
 * I420 to RGBA (alpha 255). Writes into `out` when given (length width * height * 4), else allocates.
 */
export function i420ToRgba(i420: Uint8Array, width: number, height: number, out?: Uint8Array): Uint8Array {
  checkSize(i420.length, i420Size(width, height), 'I420', width, height);
  const size = width * height * 4;
  const dst8 = out ?? new Uint8Array(size);
  checkSize(dst8.length, size, 'RGBA output', width, height);
  convertI420ToRgba(i420, width, height, dst8, 0, 0, width, height);
  return dst8;
}

/**
 * Converts the pixels of `rect` (widened to whole chroma samples, chromaAligned) of a full I420
 * frame into the same place of a full RGBA frame; the rest of `rgba` is left as it is.
 */
export function i420RectToRgba(
  i420: Uint8Array,
  width: number,
  height: number,
  rect: PixelRect,
  rgba: Uint8Array,
): void {
  checkSize(i420.length, i420Size(width, height), 'I420', width, height);
  checkSize(rgba.length, width * height * 4, 'RGBA output', width, height);
  const r = chromaAligned(rect, width, height);
  if (r.width > 0 && r.height > 0)
    convertI420ToRgba(i420, width, height, rgba, r.x, r.y, r.x + r.width, r.y + r.height);
}

/** Columns [x0, x1) and rows [y0, y1) of a frame; x0 even. */
function convertI420ToRgba(
  src: Uint8Array,
  width: number,
  height: number,
  dst8: Uint8Array,
  x0: number,
  y0: number,
  x1: number,
  y1: number,
): void {
  // A clamped view: stores saturate to [0, 255] without branches.
  const dst = new Uint8ClampedArray(dst8.buffer, dst8.byteOffset, dst8.length);
  const cw = (width + 1) >> 1;
  const uBase = width * height;
  const vBase = uBase + cw * ((height + 1) >> 1);
  const evenX1 = x1 & ~1;

  for (let y = y0; y < y1; y++) {
    let sy = y * width + x0;
    let su = uBase + (y >> 1) * cw + (x0 >> 1);
    let sv = vBase + (y >> 1) * cw + (x0 >> 1);
    let d = (y * width + x0) * 4;
    for (let x = x0; x < evenX1; x += 2) {
      const u = src[su++]! - 128;
      const v = src[sv++]! - 128;
      const rv = 409 * v + 128;
      const guv = 128 - 100 * u - 208 * v;
      const bu = 516 * u + 128;
      const c0 = 298 * (src[sy]! - 16);
      const c1 = 298 * (src[sy + 1]! - 16);
      dst[d] = (c0 + rv) >> 8;
      dst[d + 1] = (c0 + guv) >> 8;
      dst[d + 2] = (c0 + bu) >> 8;
      dst[d + 3] = 255;
      dst[d + 4] = (c1 + rv) >> 8;
      dst[d + 5] = (c1 + guv) >> 8;
      dst[d + 6] = (c1 + bu) >> 8;
      dst[d + 7] = 255;
      sy += 2;
      d += 8;
    }
    if (evenX1 !== x1) {
      const u = src[su]! - 128;
      const v = src[sv]! - 128;
      const c0 = 298 * (src[sy]! - 16);
      dst[d] = (c0 + 409 * v + 128) >> 8;
      dst[d + 1] = (c0 + 128 - 100 * u - 208 * v) >> 8;
      dst[d + 2] = (c0 + 516 * u + 128) >> 8;
      dst[d + 3] = 255;
    }
  }
}
