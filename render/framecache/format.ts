/**
 * On-disk layout of a frame cache (a directory):
 *
 *   manifest.json   FrameCacheManifest (below)
 *   frames.bin      the frames back to back: baseline JPEGs (codec "jpeg") or raw I420 ("i420");
 *                   frame i is bytes [frames[i][0], frames[i][0] + frames[i][1])
 *   landmarks.f32   float32 little-endian, frameCount x landmarkCount x (x, y, z), frame pixels
 *
 * Everything the realtime path needs per frame (pixels, where the face and the lips are) is
 * here; the JSON stays small (offsets and boxes, no landmark arrays).
 */
export const FRAMECACHE_FORMAT = 'avatar-framecache';
export const FRAMECACHE_VERSION = 1;
export const MANIFEST_FILE = 'manifest.json';
export const FRAMES_FILE = 'frames.bin';
export const LANDMARKS_FILE = 'landmarks.f32';

export type FrameCodec = 'jpeg' | 'i420';

export interface FrameCacheManifest {
  format: typeof FRAMECACHE_FORMAT;
  version: number;
  kind: 'idle' | 'clip';
  /** The idle loop: frame frameCount-1 is followed by frame 0. */
  loop: boolean;
  fps: number;
  width: number;
  height: number;
  frameCount: number;
  codec: FrameCodec;
  /** JPEG quality (codec "jpeg"). */
  quality?: number;
  landmarkCount: number;
  /** [offset, length] of each frame in frames.bin. */
  frames: [number, number][];
  /** Face box per frame, [x, y, width, height] in frame pixels (0.1 px). */
  faceBoxes: [number, number, number, number][];
  /** Mouth box per frame (outer lip line), [x, y, width, height]. */
  mouthBoxes: [number, number, number, number][];
  /** sha256 (hex) of frames.bin followed by landmarks.f32. */
  hash: string;
  createdAt: string;
  /** Free-form provenance (seed, prompt, plan, generator version). */
  meta: Record<string, unknown>;
}

export class FrameCacheError extends Error {
  override name = 'FrameCacheError';
}
