/** What a scene call plays: the scene's frame cache, by the `video_cache_id` a mint passed. */
import type { Sql, Tx } from '../platform/db/index.ts';
import type { SceneContinuation, SceneStatus } from './types.ts';

export interface SceneMedia {
  sceneId: string;
  /** Storage prefix of the scene's frame cache. */
  cacheKey: string;
  continuation: SceneContinuation;
}

/** The ready, unexpired scene of the workspace with this `video_cache_id`, or undefined. */
export async function loadSceneMedia(
  sql: Sql,
  tenantId: string,
  videoCacheId: string,
): Promise<SceneMedia | undefined> {
  return (await sceneForMint(sql, tenantId, videoCacheId))?.media;
}

/**
 * The state of the workspace's scene a mint names by `video_cache_id` (set from the moment a scene
 * is posted: it derives from the content): undefined when there is none or it expired (404
 * scene_not_found), its status otherwise (`building`: 409 scene_not_ready, retryable; `failed`: the
 * scene must be posted again), with its media when ready.
 */
export async function sceneForMint(
  sql: Sql | Tx,
  tenantId: string,
  videoCacheId: string,
): Promise<{ sceneId: string; status: SceneStatus; media?: SceneMedia } | undefined> {
  const [row] = await sql<{ id: string; status: SceneStatus; cache_key: string | null; continuation: string | null }[]>`
    select id, status, cache_key, continuation from scenes
    where tenant_id = ${tenantId} and video_cache_id = ${videoCacheId} and expires_at > now()`;
  if (!row) return undefined;
  const media: SceneMedia | undefined =
    row.status === 'ready' && row.cache_key
      ? {
          sceneId: row.id,
          cacheKey: row.cache_key,
          continuation: row.continuation === 'pingpong' ? 'pingpong' : 'loop',
        }
      : undefined;
  return { sceneId: row.id, status: row.status, ...(media ? { media } : {}) };
}
