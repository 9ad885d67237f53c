/** What a scene call plays: the scene's frame cache, by the `video_cache_id` a mint passed. */
import type { Sql } from '../db/index.ts';

export interface SceneMedia {
  sceneId: string;
  /** Storage prefix of the scene's frame cache. */
  cacheKey: string;
  continuation: 'loop' | 'pingpong';
}

export async function loadSceneMedia(sql: Sql, tenantId: string, videoCacheId: string): Promise<SceneMedia | undefined> {
  const [row] = await sql<{ id: string; cache_key: string | null; continuation: string | null }[]>`
    select id, cache_key, continuation from scenes
    where tenant_id = ${tenantId} and video_cache_id = ${videoCacheId} and status = 'ready' and expires_at > now()`;
  if (!row?.cache_key) return undefined;
  return { sceneId: row.id, cacheKey: row.cache_key, continuation: row.continuation === 'pingpong' ? 'pingpong' : 'loop' };
}
