import type { Scope } from '../core/auth/keys.ts';

/**
 * The one table of which scope each operation needs (listed in docs/api.md); null: any valid key of
 * the workspace. Keyed by operationId; the auth guard reads it, and a test checks that every
 * registered route has an entry.
 */
export const ROUTE_SCOPES = {
  // Billing and keys
  getCreditBalance: 'credits:read',
  listSessionUsage: 'usage:read',
  createApiKey: 'api_keys:write',
  // Workspace: read by any key; its settings are workspace administration, as keys are.
  getWorkspace: null,
  updateWorkspace: 'api_keys:write',
  // Avatars
  listAvatars: 'avatars:read',
  createAvatar: 'avatars:write',
  getAvatar: 'avatars:read',
  updateAvatar: 'avatars:write',
  deleteAvatar: 'avatars:write',
  redirectAvatarLoop: 'avatars:write',
  getClipLibrary: 'avatars:read',
  putClipLibrary: 'avatars:write',
  reviewClip: 'avatars:write',
  // Assets
  listAssets: 'avatars:read',
  getAsset: 'avatars:read',
  deleteAsset: 'avatars:write',
  uploadAsset: 'avatars:write',
  createRemoteAsset: 'avatars:write',
  // Realtime
  prepareRealtime: 'realtime:write',
  runTurn: 'realtime:write',
  planVideoCache: 'avatars:write',
  renderLipsync: 'realtime:write',
  mintLiveSession: 'realtime:write',
  releaseLiveSession: 'realtime:write',
  getLiveCapacity: 'realtime:write',
  createScene: 'realtime:write',
  getScene: 'realtime:write',
  // Connection history and recordings
  getConnectionHistory: 'usage:read',
  listRecordings: 'recordings:read',
  getRecording: 'recordings:read',
  getRecordingAccess: 'recordings:read',
} as const satisfies Record<string, Scope | null>;

export type OperationId = keyof typeof ROUTE_SCOPES;
