/**
 * Realtime turns: speech to the turn-stream mux (docs/mux-format.md), lip-synced on a body of frames
 * at its current cursor. `TurnStream` renders; `frameCacheBody` plays a frame cache as the body.
 */
export { TurnStream } from './stream.ts';
export type { TurnError } from './stream.ts';
export { frameCacheBody } from './body.ts';
export type { FrameCacheBody } from './body.ts';
