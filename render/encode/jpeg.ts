/** JPEG frames for the mux's `jpeg` video codec (MJPEG: every frame a complete baseline JPEG). */
import sharp from 'sharp';
import { i420ToRgba } from './frames.ts';

export interface JpegOptions {
  /** 1-100, default 80. */
  quality?: number;
  /** Layout of `frame`: tightly packed RGBA (default) or I420. */
  pixelFormat?: 'rgba' | 'i420';
}

/**
 * Encodes one frame to a baseline 4:2:0 JPEG with libjpeg-turbo (sharp). Runs on libuv's thread
 * pool, so encodes of several sessions proceed in parallel and the event loop stays free.
 */
export async function encodeJpeg(
  frame: Uint8Array,
  width: number,
  height: number,
  options: JpegOptions = {},
): Promise<Uint8Array> {
  const rgba = options.pixelFormat === 'i420' ? i420ToRgba(frame, width, height) : frame;
  if (rgba.length !== width * height * 4) {
    throw new RangeError(
      `jpeg: RGBA frame of ${rgba.length} bytes, expected ${width * height * 4} for ${width}x${height}`,
    );
  }
  const buf = await sharp(rgba, { raw: { width, height, channels: 4 } })
    .removeAlpha()
    .jpeg({ quality: options.quality ?? 80, chromaSubsampling: '4:2:0', mozjpeg: false, progressive: false })
    .toBuffer();
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.length);
}
