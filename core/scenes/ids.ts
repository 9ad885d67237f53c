import { createHash } from 'node:crypto';
import { ID_PREFIX } from '../platform/ids.ts';
import type { SceneProfile } from './types.ts';

/**
 * Content-addressed scene ids: the same bytes always give the same id, and a client that sends the
 * clip's md5 and byte length knows the id before anything is downloaded:
 *
 *   scene id       = "scn_" + first 32 hex digits of sha256("<md5, lowercase hex>:<bytes, decimal>")
 *   video cache id = "vc_"  + first 32 hex digits of sha256("<profile>:<scene id>")
 */
const HEX32 = /^[0-9a-f]{32}$/;

export function sceneIdOf(md5: string, bytes: number): string {
  return `${ID_PREFIX.scene}_${createHash('sha256').update(`${md5.toLowerCase()}:${bytes}`).digest('hex').slice(0, 32)}`;
}

export function videoCacheIdOf(sceneId: string, profile: SceneProfile): string {
  return `${ID_PREFIX.videoCache}_${createHash('sha256').update(`${profile}:${sceneId}`).digest('hex').slice(0, 32)}`;
}

/** Whether `id` can be a scene id at all (anything else is not found without a database read). */
export function isSceneId(id: string): boolean {
  return id.startsWith(`${ID_PREFIX.scene}_`) && HEX32.test(id.slice(ID_PREFIX.scene.length + 1));
}
