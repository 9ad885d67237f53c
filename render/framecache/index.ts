/**
 * Frame caches: generated loops and clips stored for realtime playback (frames plus the face
 * rig of every frame). Layout: format.ts.
 */
export { FrameCacheError } from './format.ts';
export type { FrameCacheManifest, FrameCodec } from './format.ts';
export { FrameCacheWriter } from './writer.ts';
export { openFrameCache } from './reader.ts';
export type { FrameCache } from './reader.ts';
export { buildFrameCacheFromVideo, VideoFrameCacheError } from './from-video.ts';
export type { VideoFrameCacheOptions } from './from-video.ts';
export { resolveSettings, sameSettings, settingsOf, sourceFrameAt, transcodeFrameCache } from './transcode.ts';
export type { FrameCacheSettings } from './transcode.ts';
export { createFrameDecoderThread, inProcessFrameDecoder } from './decoder.ts';
export type { FrameDecoder } from './decoder.ts';
