/**
 * Framing: any portrait -> a square (configurable) image with the face centred at a
 * set size, padded by edge extension blended into a blur where the photo runs out, and
 * the face rig of the framed image (the detected landmarks moved by the same scale and
 * offset: no second detection).
 */
import sharp from 'sharp';
import { detectFaceRig, rigFromLandmarks } from '../rig/index.ts';
import type { FaceRig, Point3 } from '../rig/types.ts';
import { GenerateError } from './errors.ts';

export interface FramingOptions {
  /** Output width in pixels (even), default 512. */
  width?: number;
  /** Output height in pixels (even), default = width. */
  height?: number;
  /** Face box (cheek to cheek) as a fraction of the frame width, default 0.45. */
  faceWidth?: number;
  /** Height of the eyes' midpoint as a fraction of the frame height, default 0.40. */
  eyeLevel?: number;
  /** A rig already detected on `portrait` (skips detection). */
  rig?: FaceRig;
}

/** A framed portrait: tightly packed RGBA (alpha 255) plus its rig in framed pixels. */
export interface FramedPortrait {
  width: number;
  height: number;
  rgba: Uint8Array;
  rig: FaceRig;
  /** framed = source * scale + offset (per axis; the scales differ by rounding only). */
  transform: { scaleX: number; scaleY: number; offsetX: number; offsetY: number };
  /** Fraction of the framed image that is padding (outside the photo). */
  paddedFraction: number;
}

export const DEFAULT_FRAME_SIZE = 512;
const DEFAULT_FACE_WIDTH = 0.45;
const DEFAULT_EYE_LEVEL = 0.4;
/** The face box may not be taller than this fraction of the frame (long faces, tall crops). */
const MAX_FACE_HEIGHT = 0.62;
/** Width of the blend from the extended edge into the blur, as a fraction of the frame. */
const PAD_BLEND = 0.08;

export async function framePortrait(portrait: Buffer | string, options: FramingOptions = {}): Promise<FramedPortrait> {
  const W = options.width ?? DEFAULT_FRAME_SIZE;
  const H = options.height ?? W;
  for (const [name, v] of [
    ['width', W],
    ['height', H],
  ] as const) {
    if (!Number.isInteger(v) || v < 64 || v > 2048 || v % 2 !== 0) {
      throw new GenerateError('invalid_options', `frame ${name} must be an even integer from 64 to 2048, got ${v}`);
    }
  }
  const faceFrac = options.faceWidth ?? DEFAULT_FACE_WIDTH;
  const eyeLevel = options.eyeLevel ?? DEFAULT_EYE_LEVEL;
  if (!(faceFrac >= 0.15 && faceFrac <= 0.8)) {
    throw new GenerateError('invalid_options', `faceWidth must be within 0.15..0.8, got ${faceFrac}`);
  }
  if (!(eyeLevel >= 0.2 && eyeLevel <= 0.6)) {
    throw new GenerateError('invalid_options', `eyeLevel must be within 0.2..0.6, got ${eyeLevel}`);
  }
  const rig = options.rig ?? (await detectFaceRig(portrait));

  // The rig decodes the image the same way (EXIF rotation applied, alpha flattened on white).
  const src = sharp(portrait, { limitInputPixels: 50_000_000 }).rotate().flatten({ background: '#ffffff' });
  const { width: sw, height: sh } = rig.imageSize;
  let scale = (faceFrac * W) / rig.box.width;
  scale = Math.min(scale, (MAX_FACE_HEIGHT * H) / rig.box.height);
  const rw = Math.max(1, Math.round(sw * scale));
  const rh = Math.max(1, Math.round(sh * scale));
  const scaleX = rw / sw;
  const scaleY = rh / sh;
  const resized = await src
    .resize(rw, rh, { fit: 'fill', kernel: 'lanczos3' })
    .toColourspace('srgb')
    .removeAlpha()
    .raw()
    .toBuffer();

  const eyes = {
    x: (rig.eyes.left.center.x + rig.eyes.right.center.x) / 2,
    y: (rig.eyes.left.center.y + rig.eyes.right.center.y) / 2,
  };
  const faceCx = rig.box.x + rig.box.width / 2;
  // Integer offsets: framed pixels are resized pixels exactly, no resampling twice.
  const ox = Math.round(W / 2 - faceCx * scaleX);
  const oy = Math.round(eyeLevel * H - eyes.y * scaleY);

  // Edge-extended canvas, and how far outside the photo each pixel is.
  const ext = Buffer.alloc(W * H * 3);
  const outside = new Float32Array(W * H);
  let padded = 0;
  for (let y = 0; y < H; y++) {
    const sy = y - oy;
    const cy = Math.min(Math.max(sy, 0), rh - 1);
    const dy = sy < 0 ? -sy : sy > rh - 1 ? sy - (rh - 1) : 0;
    for (let x = 0; x < W; x++) {
      const sx = x - ox;
      const cx = Math.min(Math.max(sx, 0), rw - 1);
      const dx = sx < 0 ? -sx : sx > rw - 1 ? sx - (rw - 1) : 0;
      const s = (cy * rw + cx) * 3;
      const d = (y * W + x) * 3;
      ext[d] = resized[s]!;
      ext[d + 1] = resized[s + 1]!;
      ext[d + 2] = resized[s + 2]!;
      const dist = Math.hypot(dx, dy);
      outside[y * W + x] = dist;
      if (dist > 0) padded++;
    }
  }
  const rgba = new Uint8Array(W * H * 4);
  if (padded > 0) {
    // Smeared edge pixels read as streaks: fade them into a strong blur of the extended canvas.
    const sigma = Math.max(2, 0.03 * W);
    const blurred = await sharp(ext, { raw: { width: W, height: H, channels: 3 } })
      .blur(sigma)
      .raw()
      .toBuffer();
    const band = PAD_BLEND * W;
    for (let i = 0; i < W * H; i++) {
      const t = Math.min(1, outside[i]! / band);
      const k = t * t * (3 - 2 * t);
      for (let c = 0; c < 3; c++) rgba[i * 4 + c] = Math.round(ext[i * 3 + c]! * (1 - k) + blurred[i * 3 + c]! * k);
      rgba[i * 4 + 3] = 255;
    }
  } else {
    for (let i = 0; i < W * H; i++) {
      rgba[i * 4] = ext[i * 3]!;
      rgba[i * 4 + 1] = ext[i * 3 + 1]!;
      rgba[i * 4 + 2] = ext[i * 3 + 2]!;
      rgba[i * 4 + 3] = 255;
    }
  }

  const zScale = (scaleX + scaleY) / 2;
  const move = (p: Point3): Point3 => ({ x: p.x * scaleX + ox, y: p.y * scaleY + oy, z: p.z * zScale });
  const b = rig.detection.box;
  const framedRig = rigFromLandmarks(
    rig.landmarks.map(move),
    { width: W, height: H },
    {
      box: { x: b.x * scaleX + ox, y: b.y * scaleY + oy, width: b.width * scaleX, height: b.height * scaleY },
      score: rig.detection.score,
    },
    rig.presence,
  );
  return {
    width: W,
    height: H,
    rgba,
    rig: framedRig,
    transform: { scaleX, scaleY, offsetX: ox, offsetY: oy },
    paddedFraction: padded / (W * H),
  };
}
