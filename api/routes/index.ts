import type { RouteConfig } from '@hono/zod-openapi';
import type { App } from '../context.ts';
import * as createApiKey from './api-keys/create-key.ts';
import * as createAvatar from './avatars/create-avatar.ts';
import * as deleteAvatar from './avatars/delete-avatar.ts';
import * as getAvatar from './avatars/get-avatar.ts';
import * as getClipLibrary from './avatars/get-clips.ts';
import * as putClipLibrary from './avatars/put-clips.ts';
import * as listAvatars from './avatars/list-avatars.ts';
import * as redirectAvatarLoop from './avatars/redirect-loop.ts';
import * as reviewClip from './avatars/review-clip.ts';
import * as updateAvatar from './avatars/update-avatar.ts';
import * as createRemoteAsset from './assets/create-remote-asset.ts';
import * as deleteAsset from './assets/delete-asset.ts';
import * as getAsset from './assets/get-asset.ts';
import * as listAssets from './assets/list-assets.ts';
import * as uploadAsset from './assets/upload-asset.ts';
import * as getCreditBalance from './credits/get-balance.ts';
import * as renderLipsync from './lipsync/render-lipsync.ts';
import * as listSessionUsage from './usage/list-sessions.ts';
import * as createScene from './scenes/create-scene.ts';
import * as getScene from './scenes/get-scene.ts';
import * as listRecordings from './recordings/list-recordings.ts';
import * as getRecording from './recordings/get-recording.ts';
import * as getRecordingAccess from './recordings/get-recording-access.ts';
import * as mintLiveSession from './realtime/livekit-session.ts';
import * as releaseLiveSession from './realtime/livekit-release.ts';
import * as getLiveCapacity from './realtime/livekit-capacity.ts';
import * as getConnectionHistory from './sessions/connection-history.ts';
import * as prepareRealtime from './realtime/prepare-realtime.ts';
import * as runTurn from './realtime/run-turn.ts';
import * as planVideoCache from './realtime/plan-video-cache.ts';
import * as joinLiveSession from './realtime/livekit-join.ts';
import * as getWorkspace from './workspace/get-workspace.ts';
import * as updateWorkspace from './workspace/update-workspace.ts';

export interface RouteModule {
  route: RouteConfig;
  register(app: App): void;
}

/** Every /api/v1 route, in the order the OpenAPI document lists them. Adding a route means adding its module here. */
export const ROUTES: readonly RouteModule[] = [
  getCreditBalance,
  listSessionUsage,
  createApiKey,
  getWorkspace,
  updateWorkspace,
  listAvatars,
  createAvatar,
  getAvatar,
  updateAvatar,
  deleteAvatar,
  redirectAvatarLoop,
  getClipLibrary,
  putClipLibrary,
  reviewClip,
  listAssets,
  getAsset,
  deleteAsset,
  uploadAsset,
  createRemoteAsset,
  renderLipsync,
  mintLiveSession,
  releaseLiveSession,
  getLiveCapacity,
  getConnectionHistory,
  prepareRealtime,
  runTurn,
  planVideoCache,
  createScene,
  getScene,
  listRecordings,
  getRecording,
  getRecordingAccess,
];

/**
 * The /api/v1 routes whose credential is not an API key (no scope, no 401): a live call's join,
 * whose join token is the credential. In the OpenAPI document after ROUTES.
 */
export const KEYLESS_ROUTES: readonly RouteModule[] = [joinLiveSession];
