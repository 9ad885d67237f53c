/**
 * Scenes: a workspace's clip prepared as a call's picture (docs/scenes.md). A row per clip content
 * (table `scenes`, migrations 0009 and 0011), built by a durable job into a frame cache.
 */

/** The one build profile: the picture fits in SCENE_FRAME_SIZE (aspect kept), 25 fps, JPEG frames with landmarks. */
export const SCENE_PROFILES = ['scene-v0'] as const;
export type SceneProfile = (typeof SCENE_PROFILES)[number];

/** How a call continues the clip at its end: from its first frame again, or backwards and forwards. */
export const SCENE_CONTINUATIONS = ['loop', 'pingpong'] as const;
export type SceneContinuation = (typeof SCENE_CONTINUATIONS)[number];

export const SCENE_STATUSES = ['building', 'ready', 'failed'] as const;
export type SceneStatus = (typeof SCENE_STATUSES)[number];

/**
 * Why a scene failed: the download failed (retry later), the clip cannot be a scene (use another),
 * the bytes are not the ones named by md5 and bytes, or the build itself broke.
 */
export const SCENE_ERRORS = ['source_unreachable', 'source_unusable', 'source_mismatch', 'build_failed'] as const;
export type SceneErrorCode = (typeof SCENE_ERRORS)[number];

/** The `scene_id` of a failed answer whose clip's id could not be known (its download failed before md5 and bytes were). */
export const UNRESOLVED_SCENE_ID = 'unresolved';

/** Frames per second of every scene: the rate the call worker renders at. */
export const SCENE_FPS = 25;

export interface SceneRow {
  tenant_id: string;
  id: string;
  status: SceneStatus;
  error: SceneErrorCode | null;
  error_message: string | null;
  profile: SceneProfile;
  continuation: SceneContinuation | null;
  source_url: string;
  source_md5: string | null;
  source_bytes: string | number | null;
  video_cache_id: string | null;
  cache_key: string | null;
  frame_count: number | null;
  fps: number | null;
  width: number | null;
  height: number | null;
  duration_seconds: number | null;
  created_at: Date;
  updated_at: Date;
  ready_at: Date | null;
  expires_at: Date;
  build_id: string | null;
  source_key: string | null;
}

/** A scene as the API reads it (docs/scenes.md, "The scene"). */
export interface Scene {
  sceneId: string;
  status: SceneStatus;
  profile: SceneProfile;
  continuation: SceneContinuation;
  md5: string | null;
  bytes: number | null;
  videoCacheId: string | null;
  frameCount: number | null;
  /** Frames before the picture repeats under the continuation (loop: frameCount; pingpong: 2 x (frameCount - 1)). */
  cycleFrameCount: number | null;
  fps: number | null;
  width: number | null;
  height: number | null;
  durationSeconds: number | null;
  error: SceneErrorCode | null;
  errorMessage: string | null;
  createdAt: Date | null;
  readyAt: Date | null;
  expiresAt: Date | null;
}

/** Data of a scene build job (queue SCENE_BUILD_JOB). */
export interface SceneBuildJobData {
  tenantId: string;
  sceneId: string;
  /** Must still be the row's build_id when the build publishes or fails it. */
  buildId: string;
}

export const SCENE_BUILD_JOB = 'scene-build';
export const SCENE_BUILD_DEAD_JOB = 'scene-build-dead';
/** The periodic sweep of expired scenes (their rows and frame caches). */
export const SCENE_EXPIRY_JOB = 'scene-expiry';

export function cycleFrames(frameCount: number, continuation: SceneContinuation): number {
  return continuation === 'pingpong' && frameCount > 1 ? 2 * (frameCount - 1) : frameCount;
}

export function toScene(r: SceneRow): Scene {
  const continuation = r.continuation ?? 'loop';
  return {
    sceneId: r.id,
    status: r.status,
    profile: r.profile,
    continuation,
    md5: r.source_md5,
    bytes: r.source_bytes === null ? null : Number(r.source_bytes),
    videoCacheId: r.status === 'ready' ? r.video_cache_id : null,
    frameCount: r.status === 'ready' ? r.frame_count : null,
    cycleFrameCount: r.status === 'ready' && r.frame_count !== null ? cycleFrames(r.frame_count, continuation) : null,
    fps: r.status === 'ready' ? r.fps : null,
    width: r.status === 'ready' ? r.width : null,
    height: r.status === 'ready' ? r.height : null,
    durationSeconds: r.status === 'ready' ? r.duration_seconds : null,
    error: r.status === 'failed' ? r.error : null,
    errorMessage: r.status === 'failed' ? r.error_message : null,
    createdAt: r.created_at,
    readyAt: r.ready_at,
    expiresAt: r.expires_at,
  };
}
