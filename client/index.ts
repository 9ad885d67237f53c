/**
 * @avatar-platform/client: the decoder of the avatar turn stream (POST /api/v1/realtime/turn).
 * Byte layout: docs/mux-format.md. Runs in browsers and Node (no Node-only APIs).
 */
export { readAvatarMux, AvatarMuxError, pcmToFloat32 } from './reader.ts';
export type { AvatarMuxErrorCode, AvatarMuxSource, ReadAvatarMuxOptions } from './reader.ts';
export type * from './types.ts';
export { MUX_VERSION_MAJOR, MUX_VERSION_MINOR } from './format.ts';
