/**
 * Image decoding (sharp) and the two input tensors the models need: a
 * letterboxed image or tile for the detector and a rotated square face crop
 * for the landmark model.
 */
import sharp from 'sharp';
import type { Metadata } from 'sharp';
import { RigError } from './errors.ts';

/** Decoded 8-bit RGB, row-major, no padding. */
export interface RgbImage {
  width: number;
  height: number;
  data: Buffer;
  /** Reduced copies made for one rig call, by integer factor (see reduced()). */
  reductions?: Map<number, Promise<RgbImage>>;
}

/** The image shrunk by about `factor` (area-averaged by sharp), made once per image and factor. */
export function reduced(img: RgbImage, factor: number): Promise<RgbImage> {
  img.reductions ??= new Map();
  let copy = img.reductions.get(factor);
  if (!copy) {
    const width = Math.max(1, Math.round(img.width / factor));
    const height = Math.max(1, Math.round(img.height / factor));
    copy = sharp(img.data, { raw: { width: img.width, height: img.height, channels: 3 } })
      .resize(width, height, { fit: 'fill' })
      .raw()
      .toBuffer()
      .then((data) => ({ width, height, data }));
    img.reductions.set(factor, copy);
  }
  return copy;
}

// Larger than any camera a portrait comes from (a 50 MP frame is ~8660x5770);
// anything bigger is a mistake or a decompression bomb, and decoding it would
// take ~150 MB+ on a machine that is also rendering live sessions.
const MAX_IMAGE_PIXELS = 50_000_000;
// Also cap each side: a 1x50,000,000 strip passes the pixel cap but is no photo.
const MAX_IMAGE_SIDE = 16_384;
// Smaller than this is an icon, not a photo (and far below the minimum face
// size); refuse it as unusable rather than run the models on it.
const MIN_IMAGE_SIDE = 32;

/** Decode any format sharp reads (first frame), honour EXIF orientation, flatten alpha. */
export async function decodeImage(input: Buffer | string): Promise<RgbImage> {
  if (typeof input !== 'string' && input.length === 0) {
    throw new RigError('invalid_image', 'The image file is empty (0 bytes).');
  }
  let meta: Metadata;
  try {
    meta = await sharp(input, { limitInputPixels: false }).metadata();
  } catch (err) {
    throw new RigError('invalid_image', 'This file could not be read as an image.', {}, { cause: err });
  }
  const { width, height } = meta;
  if (!width || !height) {
    throw new RigError('invalid_image', 'This file could not be read as an image.');
  }
  // EXIF orientations 5-8 swap the sides; the limits apply either way.
  if (width * height > MAX_IMAGE_PIXELS || Math.max(width, height) > MAX_IMAGE_SIDE) {
    throw new RigError(
      'invalid_image',
      `The image is ${width}x${height} pixels, which is too large (at most ${MAX_IMAGE_PIXELS / 1e6} megapixels and ${MAX_IMAGE_SIDE} pixels a side).`,
      { width, height },
    );
  }
  if (Math.min(width, height) < MIN_IMAGE_SIDE) {
    throw new RigError(
      'invalid_image',
      `The image is ${width}x${height} pixels, which is too small (at least ${MIN_IMAGE_SIDE} pixels a side).`,
      { width, height },
    );
  }
  try {
    const { data, info } = await sharp(input, { limitInputPixels: MAX_IMAGE_PIXELS, failOn: 'error' })
      .rotate() // apply EXIF orientation so pixels match what people see
      .flatten({ background: '#ffffff' })
      .toColourspace('srgb')
      .raw()
      .toBuffer({ resolveWithObject: true });
    return { width: info.width, height: info.height, data: toRgb(data, info.channels) };
  } catch (err) {
    throw new RigError('invalid_image', 'The image is damaged or could not be decoded.', {}, { cause: err });
  }
}

function toRgb(data: Buffer, channels: number): Buffer {
  if (channels === 3) return data;
  // toColourspace('srgb') should always give 3 channels; keep a safe path for grey (+alpha) or RGBA.
  const n = data.length / channels;
  const out = Buffer.allocUnsafe(n * 3);
  for (let i = 0; i < n; i++) {
    for (let ch = 0; ch < 3; ch++) out[i * 3 + ch] = data[i * channels + (channels >= 3 ? ch : 0)]!;
  }
  return out;
}

/** Where an image region sits inside the square detector input. */
export interface Letterbox {
  /** Top-left of the region in the image, pixels. */
  offsetX: number;
  offsetY: number;
  scaleX: number;
  scaleY: number;
  padX: number;
  padY: number;
}

/** An axis-aligned region of the image in whole pixels. */
export interface Region {
  left: number;
  top: number;
  width: number;
  height: number;
}

/**
 * Fit an image region (default: all of it), aspect kept, into a size x size
 * square padded with black (as MediaPipe does), as float NHWC in [lo, hi].
 */
export async function letterboxTensor(
  img: RgbImage,
  size: number,
  lo: number,
  hi: number,
  region: Region = { left: 0, top: 0, width: img.width, height: img.height },
): Promise<{ tensor: Float32Array; box: Letterbox }> {
  const s = size / Math.max(region.width, region.height);
  const w = Math.max(1, Math.round(region.width * s));
  const h = Math.max(1, Math.round(region.height * s));
  const padX = Math.floor((size - w) / 2);
  const padY = Math.floor((size - h) / 2);
  const resized = await sharp(img.data, { raw: { width: img.width, height: img.height, channels: 3 } })
    .extract(region)
    .resize(w, h, { fit: 'fill' })
    .raw()
    .toBuffer();
  const tensor = new Float32Array(size * size * 3).fill(lo); // black padding
  const k = (hi - lo) / 255;
  for (let y = 0; y < h; y++) {
    let src = y * w * 3;
    let dst = ((y + padY) * size + padX) * 3;
    for (let i = 0; i < w * 3; i++) tensor[dst++] = lo + resized[src++]! * k;
  }
  return {
    tensor,
    box: { offsetX: region.left, offsetY: region.top, scaleX: w / region.width, scaleY: h / region.height, padX, padY },
  };
}

/** A square region of the image, rotated by `angle` radians (clockwise on screen) about its centre. */
export interface Roi {
  cx: number;
  cy: number;
  size: number;
  angle: number;
}

/** Map a point given in ROI units ([0,1] across the crop) back to image pixels. */
export function roiToImage(roi: Roi, u: number, v: number): { x: number; y: number } {
  const dx = (u - 0.5) * roi.size;
  const dy = (v - 0.5) * roi.size;
  const c = Math.cos(roi.angle);
  const s = Math.sin(roi.angle);
  return { x: roi.cx + c * dx - s * dy, y: roi.cy + s * dx + c * dy };
}

/**
 * Sample the ROI into an out x out float NHWC tensor in [0, 1] with bilinear
 * interpolation and edge clamping. A large ROI is first reduced with sharp so
 * that bilinear sampling does not alias (it only sees 4 source pixels).
 */
export async function cropTensor(img: RgbImage, roi: Roi, out: number): Promise<Float32Array> {
  const factor = Math.floor(roi.size / out / 1.5);
  let src = img;
  let r = roi;
  if (factor >= 2) {
    src = await reduced(img, factor);
    const sx = src.width / img.width;
    const sy = src.height / img.height;
    r = { cx: roi.cx * sx, cy: roi.cy * sy, size: roi.size * sx, angle: roi.angle }; // sx ~ sy: stays square
  }
  const tensor = new Float32Array(out * out * 3);
  const { width, height, data } = src;
  const c = Math.cos(r.angle);
  const s = Math.sin(r.angle);
  const step = r.size / out;
  let o = 0;
  for (let v = 0; v < out; v++) {
    const dy = (v + 0.5) * step - r.size / 2;
    for (let u = 0; u < out; u++) {
      const dx = (u + 0.5) * step - r.size / 2;
      // pixel centres sit at integer + 0.5
      const x = Math.min(Math.max(r.cx + c * dx - s * dy - 0.5, 0), width - 1);
      const y = Math.min(Math.max(r.cy + s * dx + c * dy - 0.5, 0), height - 1);
      const x0 = Math.floor(x);
      const y0 = Math.floor(y);
      const x1 = Math.min(x0 + 1, width - 1);
      const y1 = Math.min(y0 + 1, height - 1);
      const fx = x - x0;
      const fy = y - y0;
      const i00 = (y0 * width + x0) * 3;
      const i01 = (y0 * width + x1) * 3;
      const i10 = (y1 * width + x0) * 3;
      const i11 = (y1 * width + x1) * 3;
      for (let ch = 0; ch < 3; ch++) {
        const top = data[i00 + ch]! + (data[i01 + ch]! - data[i00 + ch]!) * fx;
        const bot = data[i10 + ch]! + (data[i11 + ch]! - data[i10 + ch]!) * fx;
        tensor[o++] = (top + (bot - top) * fy) / 255;
      }
    }
  }
  return tensor;
}
