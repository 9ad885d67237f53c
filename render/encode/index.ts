/**
 * Encoders of the frame engine: the turn-stream mux (docs/mux-format.md), MP4 files, JPEG frames
 * for the mux, and I420 frames for LiveKit.
 */
export { AvatarMuxWriter, errorRecord, framePts } from './mux.ts';
export { Mp4Writer, resolveFfmpegPath } from './mp4.ts';
export type { Mp4Result } from './mp4.ts';
export { encodeJpeg } from './jpeg.ts';
export {
  chromaAligned,
  i420Planes,
  i420RectToRgba,
  i420Size,
  i420ToRgba,
  rgbaRectToI420,
  rgbaToI420,
} from './frames.ts';
export { encodeWav } from './wav.ts';
