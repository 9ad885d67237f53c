/**
 * @avatar-platform/client: the client of the avatar platform's REST API (AvatarClient, typed from
 * the API's OpenAPI document) and the decoder of the turn stream (readAvatarMux; byte layout in
 * docs/mux-format.md). Runs in browsers and Node (fetch, no Node-only APIs).
 */
export { AvatarClient } from './client.ts';
export type {
  AvatarClientOptions,
  CallOptions,
  MintGrant,
  MintResult,
  MintWithQueueOptions,
  RequestOptions,
  RetryOptions,
  TurnStream,
  UploadInput,
} from './client.ts';
export { ApiError, parseRetryAfter } from './errors.ts';
export type { ApiErrorKind, ConcurrencyCounts, QueuePosition } from './errors.ts';
export type * from './api-types.ts';
export type { components, operations, paths } from './openapi.ts';
export { OPERATIONS } from './operations.ts';
export { readAvatarMux, AvatarMuxError, pcmToFloat32 } from './reader.ts';
export type { AvatarMuxErrorCode, AvatarMuxSource, ReadAvatarMuxOptions } from './reader.ts';
export type * from './types.ts';
export { MUX_VERSION_MAJOR, MUX_VERSION_MINOR } from './format.ts';
