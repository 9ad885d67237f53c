/**
 * What the realtime tests (and the turn benchmark) share: avatars ready for turns (an idle loop of
 * a fixture portrait, generated once per process and stored as each avatar's frame cache, as the
 * loop job would leave it), library clips, and reading a turn stream.
 */
import { mkdtempSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readAvatarMux, type AvatarMuxRecord } from '../client/index.ts';
import { newId } from '../core/platform/ids.ts';
import type { Services } from '../core/wiring/services.ts';
import type { ObjectStorage } from '../core/platform/storage/index.ts';
import { generateIdleLoop, preparePortrait, writeMotion } from '../render/generate/index.ts';

const PORTRAIT = fileURLToPath(new URL('../render/rig/fixtures/astronaut.jpg', import.meta.url));

/** Frames, size and rate of the test loop. */
export const TEST_LOOP = { seconds: 2, fps: 25, size: 256 } as const;

export interface LoopSpec {
  seconds: number;
  size: number;
}

const loops = new Map<string, Promise<string>>();

/** A loop's frame cache directory (generated on first use, once per spec and process); the test loop by default. */
export function testLoopDir(spec: LoopSpec = TEST_LOOP): Promise<string> {
  const id = `${spec.seconds}s-${spec.size}`;
  let dir = loops.get(id);
  if (!dir) {
    dir = (async () => {
      const out = path.join(mkdtempSync(path.join(os.tmpdir(), 'realtime-loop-')), 'cache');
      const idle = await generateIdleLoop(await preparePortrait(PORTRAIT, { width: spec.size }), {
        seconds: spec.seconds,
        fps: TEST_LOOP.fps,
        seed: 'realtime-test',
      });
      await writeMotion(idle, { cacheDir: out });
      return out;
    })();
    loops.set(id, dir);
  }
  return dir;
}

/** Stores a loop's frame cache under `key` (manifest.json, frames.bin, landmarks.f32). */
export async function storeTestCache(storage: ObjectStorage, key: string, spec: LoopSpec = TEST_LOOP): Promise<string> {
  const dir = await testLoopDir(spec);
  for (const f of await readdir(dir))
    await storage.put(`${key}/${f}`, await readFile(path.join(dir, f)), { contentType: 'application/octet-stream' });
  return key;
}

/** What the helpers need of an API's services (a TestApi, or a benchmark's own services). */
export interface WithServices {
  services: Pick<Services, 'sql' | 'storage'>;
}

export interface ReadyAvatarOptions {
  displayName?: string;
  personality?: string;
  defaultVoiceId?: string;
  /** Another state than ready (the loop still generating: no frame cache). */
  status?: 'preprocessing' | 'failed' | 'disabled';
  /** Point the loop at a cache that is not in storage (the API side of a live call never reads its frames). */
  missingCache?: boolean;
  /** The loop to store (default: the test loop). */
  loop?: LoopSpec;
  /** A declared behaviour (the clip library's `clip_behavior`). */
  behavior?: object;
  /** Soft-deleted. */
  deleted?: boolean;
}

/** An avatar of `tenantId` whose idle loop has published (status ready, a frame cache serving). */
export async function readyAvatar(
  t: WithServices,
  tenantId: string,
  o: ReadyAvatarOptions = {},
): Promise<{ avatarId: string; cacheKey: string | null }> {
  const avatarId = newId('avatar');
  const ready = !o.status;
  const cacheKey = ready ? `tenants/${tenantId}/avatars/${avatarId}/loops/gen_test/cache` : null;
  await t.services.sql`
    insert into avatars (id, tenant_id, display_name, status, idle_video_status, source_kind, personality, default_voice_id,
                         serving_loop_key, serving_cache_key, cache_manifest_id, cache_version, clip_behavior, deleted_at)
    values (${avatarId}, ${tenantId}, ${o.displayName ?? 'Ada'}, ${o.status ?? 'ready'}, ${ready ? 'ready' : 'generating'}, 'video',
            ${o.personality ?? null}, ${o.defaultVoiceId ?? null}, ${ready ? `tenants/${tenantId}/avatars/${avatarId}/loops/gen_test/idle.mp4` : null},
            ${cacheKey}, ${ready ? 'cmf_test' : null}, ${ready ? 1 : 0}, ${o.behavior ? t.services.sql.json(o.behavior as never) : null}, ${o.deleted ? new Date() : null})`;
  if (cacheKey && !o.missingCache) await storeTestCache(t.services.storage, cacheKey, o.loop);
  return { avatarId, cacheKey };
}

/** A library clip of the avatar: with a frame cache (generated, ready) or without (an accepted upload awaiting its cache). */
export async function libraryClip(
  t: WithServices,
  tenantId: string,
  avatarId: string,
  clipId: string,
  o: { withCache: boolean },
): Promise<string | null> {
  const cacheKey = o.withCache ? `tenants/${tenantId}/avatars/${avatarId}/clips/${clipId}/gen_test/cache` : null;
  if (cacheKey) await storeTestCache(t.services.storage, cacheKey);
  await t.services.sql`
    insert into avatar_clips (avatar_id, clip_id, status, source_kind, motion_prompt, duration_seconds, upload_asset_id, cache_key)
    values (${avatarId}, ${clipId}, 'ready', ${o.withCache ? 'generated' : 'upload'}, ${o.withCache ? 'nod' : null}, ${o.withCache ? 4 : null},
            ${o.withCache ? null : 'ast_upload'}, ${cacheKey})`;
  return cacheKey;
}

/** Every record of a turn stream (a response body). */
export async function readTurn(body: ReadableStream<Uint8Array> | null): Promise<AvatarMuxRecord[]> {
  if (!body) throw new Error('no body');
  const out: AvatarMuxRecord[] = [];
  for await (const r of readAvatarMux(body)) out.push(r);
  return out;
}
