/**
 * Frame caches: generated loops and clips stored for realtime playback (frames plus the face
 * rig of every frame). Layout: format.ts.
 */
export { FRAMECACHE_FORMAT, FRAMECACHE_VERSION, FrameCacheError } from './format.ts';
export type { FrameCacheManifest, FrameCodec } from './format.ts';
export { FrameCacheWriter } from './writer.ts';
export type { FrameCacheWriterOptions } from './writer.ts';
export { packLandmarks, unpackLandmarks } from './landmarks.ts';
export { openFrameCache } from './reader.ts';
export type { FrameCache, OpenFrameCacheOptions } from './reader.ts';
export { buildFrameCacheFromVideo, VideoFrameCacheError, FROM_VIDEO_VERSION } from './from-video.ts';
export type {
  VideoFrameCacheErrorCode,
  VideoFrameCacheOptions,
  VideoFrameCacheResult,
  VideoFrameCacheStats,
} from './from-video.ts';
export {
  coverTransform,
  resampledFrameCount,
  resolveSettings,
  sameSettings,
  settingsOf,
  sourceFrameAt,
  transcodeFrameCache,
} from './transcode.ts';
export type { FrameCacheSettings } from './transcode.ts';
