/** POST /realtime/prepare and POST /realtime/video-cache/plan, with real storage, PostgreSQL and the job worker. */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startJobWorkers, type RunningWorkers } from '../../../core/wiring/job-workers.ts';
import { fetchFrameCache } from '../../../core/realtime/index.ts';
import { openFrameCache, type FrameCacheManifest } from '../../../render/framecache/index.ts';
import { closeTts } from '../../../render/tts/index.ts';
import { json, testApi, waitFor } from '../../../test/helpers.ts';
import { libraryClip, readTurn, readyAvatar, storeTestCache, TEST_LOOP, testLoopDir } from '../../../test/realtime.ts';

const t = await testApi({ env: { JOB_POLL_SECONDS: '1' } });
let workers: RunningWorkers;
let loop: FrameCacheManifest;
beforeAll(async () => {
  workers = await startJobWorkers(t.services, { concurrency: 1 });
  loop = (await openFrameCache(await testLoopDir())).manifest;
}, 60_000);
afterAll(async () => {
  await workers.stop({ timeoutMs: 2000 });
  await t.close();
  await closeTts();
});

const PREPARE = '/api/v1/realtime/prepare';
const PLAN = '/api/v1/realtime/video-cache/plan';

interface Prepared {
  avatar_id: string;
  renderer_avatar_id: string;
  model_id: string;
  backend_id: string;
  status: string;
  registered: boolean;
  source_kind: string;
  timings: Record<string, number>;
  video_cache: Record<string, unknown>;
}

interface Plan {
  status: 'ready' | 'queued';
  plan: {
    settings: Record<string, number>;
    entries: { clip_id: string; status: string; native: boolean; error: string | null }[];
    queued: number;
  };
  manifest: {
    id: string | null;
    avatar_id: string;
    cache_version: number;
    settings: Record<string, number>;
    entries: {
      clip_id: string;
      frames: number;
      fps: number;
      width: number;
      height: number;
      quality: number;
      codec: string;
      bytes: number;
      digest: string;
      duration_seconds: number;
    }[];
  };
}

describe('POST /realtime/prepare', () => {
  it("happy: loads the avatar's loop into the renderer once: registered, then not; a turn after it plays the same media", async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 10 });
    const { avatarId, cacheKey } = await readyAvatar(t, tenantId);
    expect(t.services.realtimeMedia.isOpen(cacheKey!)).toBe(false);
    const res = await t.request('POST', PREPARE, { key: apiKey, body: { avatar_id: avatarId } });
    expect(res.status).toBe(200);
    const first = await json<Prepared>(res);
    expect(first).toMatchObject({
      avatar_id: avatarId,
      renderer_avatar_id: `${avatarId}:1`,
      model_id: 'builtin-rig-v1',
      backend_id: 'builtin:cpu',
      status: 'ready',
      registered: true,
      source_kind: 'portrait',
      video_cache: {
        clip_id: 'source',
        fps: TEST_LOOP.fps,
        width: TEST_LOOP.size,
        height: TEST_LOOP.size,
        frames: loop.frameCount,
        codec: 'jpeg',
        digest: loop.hash,
      },
    });
    expect(Object.keys(first.timings).sort()).toEqual([
      'engine_ms',
      'faces_ms',
      'fetch_ms',
      'open_ms',
      'total_ms',
      'tts_ms',
    ]);
    expect(t.services.realtimeMedia.isOpen(cacheKey!)).toBe(true);
    const again = await json<Prepared>(
      await t.request('POST', PREPARE, { key: apiKey, body: { avatar_id: avatarId } }),
    );
    expect(again).toMatchObject({ registered: false, timings: { fetch_ms: 0, open_ms: 0, faces_ms: 0 } });
    // Prepare bills nothing.
    expect(await t.services.ledger.balance(tenantId)).toMatchObject({
      balanceCreditMicros: 10_000_000,
      reservedCreditMicros: 0,
    });
    const turn = await t.request('POST', '/api/v1/realtime/turn', {
      key: apiKey,
      body: { avatar_id: avatarId, mode: 'repeat', text: 'Ready.' },
    });
    expect((await readTurn(turn.body)).pop()?.type).toBe('end');
  }, 60_000);

  it('error: 404 unknown, deleted or another workspace’s avatar; 409 not ready; 402 no available credits; 502 when its media cannot be loaded; 422 bad bodies', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 10 });
    const other = await t.newTenant({ credits: 10 });
    const theirs = await readyAvatar(t, other.tenantId);
    const deleted = await readyAvatar(t, tenantId);
    await t.services.sql`update avatars set deleted_at = now(), status = 'deleted' where id = ${deleted.avatarId}`;
    const generating = await readyAvatar(t, tenantId, { status: 'preprocessing' });
    const broken = await readyAvatar(t, tenantId, { missingCache: true });
    const cases: [unknown, number, string | null][] = [
      [{ avatar_id: 'ava_nope' }, 404, 'not_found'],
      [{ avatar_id: theirs.avatarId }, 404, 'not_found'],
      [{ avatar_id: deleted.avatarId }, 404, 'not_found'],
      [{ avatar_id: generating.avatarId }, 409, 'avatar_state_conflict'],
      [{ avatar_id: broken.avatarId }, 502, 'media_unavailable'],
      [{ avatarId: theirs.avatarId }, 422, 'avatar_id'],
      [{ avatar_id: theirs.avatarId, warm: true }, 422, 'warm'],
      [{}, 422, 'avatar_id'],
      [{ avatar_id: 7 }, 422, 'avatar_id'],
    ];
    for (const [body, status, codeOrField] of cases) {
      const res = await t.request('POST', PREPARE, { key: apiKey, body });
      expect(res.status, JSON.stringify(body)).toBe(status);
      const b = await json(res);
      if (status === 422) expect(b).toMatchObject({ code: 'validation_error', field: codeOrField });
      else expect(b).toMatchObject({ code: codeOrField });
    }
    const broke = await t.newTenant({ credits: 0 });
    const a = await readyAvatar(t, broke.tenantId);
    const res = await t.request('POST', PREPARE, { key: broke.apiKey, body: { avatar_id: a.avatarId } });
    expect(res.status).toBe(402);
    expect(await json(res)).toMatchObject({ code: 'insufficient_credits' });
    // A key scoped without realtime:write cannot prepare.
    const readOnly = await t.newTenant({ credits: 10, scopes: ['avatars:read'] });
    const forbidden = await t.request('POST', PREPARE, { key: readOnly.apiKey, body: { avatar_id: a.avatarId } });
    expect(forbidden.status).toBe(403);
    expect(await json(forbidden)).toMatchObject({ requiredScope: 'realtime:write' });
  }, 60_000);
});

describe('POST /realtime/video-cache/plan', () => {
  it('happy: at the generated settings: ready at once, the manifest listing the loop and each clip with a cache; an upload without one waits', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const { avatarId } = await readyAvatar(t, tenantId);
    await libraryClip(t, tenantId, avatarId, 'nod', { withCache: true });
    await libraryClip(t, tenantId, avatarId, 'wave', { withCache: false });
    const res = await t.request('POST', PLAN, { key: apiKey, body: { avatar_id: avatarId } });
    expect(res.status).toBe(200);
    const p = await json<Plan>(res);
    expect(p.status).toBe('queued'); // the upload has no frame cache yet
    expect(p.plan.entries).toEqual([
      { clip_id: 'source', status: 'ready', native: true, error: null },
      { clip_id: 'nod', status: 'ready', native: true, error: null },
      { clip_id: 'wave', status: 'waiting', native: false, error: null },
    ]);
    expect(p.plan).toMatchObject({ settings: { fps: 25, width: 256, height: 256, quality: 90 }, queued: 0 });
    const entry = {
      frames: loop.frameCount,
      fps: 25,
      width: 256,
      height: 256,
      quality: 90,
      codec: 'jpeg',
      digest: loop.hash,
      duration_seconds: TEST_LOOP.seconds,
    };
    expect(p.manifest).toMatchObject({
      id: 'cmf_test',
      avatar_id: avatarId,
      cache_version: 1,
      entries: [
        { clip_id: 'source', ...entry },
        { clip_id: 'nod', ...entry },
      ],
    });
    expect(p.manifest.entries[0]!.bytes).toBeGreaterThan(loop.frames.at(-1)![0]);
    // Once the upload's cache exists, the same plan is ready.
    await t.services
      .sql`update avatar_clips set cache_key = ${`tenants/${tenantId}/avatars/${avatarId}/clips/nod/gen_test/cache`} where clip_id = 'wave' and avatar_id = ${avatarId}`;
    expect(
      (await json<Plan>(await t.request('POST', PLAN, { key: apiKey, body: { avatar_id: avatarId } }))).status,
    ).toBe('ready');
  }, 60_000);

  it('happy: at other settings: queued, transcoded by the job, then ready; the entries are real caches at those settings', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const { avatarId } = await readyAvatar(t, tenantId);
    await libraryClip(t, tenantId, avatarId, 'nod', { withCache: true });
    const body = { avatar_id: avatarId, video_cache: { fps: 10, width: 128, quality: 60 } };
    const first = await json<Plan>(await t.request('POST', PLAN, { key: apiKey, body }));
    expect(first).toMatchObject({
      status: 'queued',
      plan: { settings: { fps: 10, width: 128, height: 128, quality: 60 }, queued: 2 },
      manifest: { entries: [] },
    });
    expect(first.plan.entries.map((e) => [e.clip_id, e.status, e.native])).toEqual([
      ['source', 'queued', false],
      ['nod', 'queued', false],
    ]);
    // Asking again while the jobs run queues nothing more.
    const second = await json<Plan>(await t.request('POST', PLAN, { key: apiKey, body }));
    expect(second.plan.queued).toBe(0);
    const done = await waitFor(
      'the transcodes to finish',
      async () => {
        const p = await json<Plan>(await t.request('POST', PLAN, { key: apiKey, body }));
        return p.status === 'ready' ? p : undefined;
      },
      { intervalMs: 1000 },
    );
    expect(done.manifest.entries).toEqual([
      expect.objectContaining({
        clip_id: 'source',
        frames: 20,
        fps: 10,
        width: 128,
        height: 128,
        quality: 60,
        codec: 'jpeg',
        duration_seconds: 2,
      }),
      expect.objectContaining({ clip_id: 'nod', frames: 20, fps: 10, width: 128, height: 128, quality: 60 }),
    ]);
    const [row] = await t.services.sql<{ cache_key: string }[]>`
      select cache_key from video_cache_entries where avatar_id = ${avatarId} and clip_id = 'source' and not native`;
    const dir = path.join(mkdtempSync(path.join(os.tmpdir(), 'plan-test-')), 'cache');
    await fetchFrameCache(t.services.storage, row!.cache_key, dir);
    const cache = await openFrameCache(dir, { verify: true });
    expect(cache.manifest).toMatchObject({
      fps: 10,
      width: 128,
      height: 128,
      quality: 60,
      frameCount: 20,
      hash: done.manifest.entries[0]!.digest,
    });
    expect(cache.landmarks(0)[0]).toBeCloseTo((await openFrameCache(await testLoopDir())).landmarks(0)[0]! / 2, 3);

    // A new loop publishes: the old entries go (rows and objects), the plan starts over for the new cache.
    const newKey = `tenants/${tenantId}/avatars/${avatarId}/loops/gen_new/cache`;
    await storeTestCache(t.services.storage, newKey);
    await t.services.sql`update avatars set serving_cache_key = ${newKey}, cache_version = 2 where id = ${avatarId}`;
    const fresh = await json<Plan>(await t.request('POST', PLAN, { key: apiKey, body }));
    expect(fresh).toMatchObject({ status: 'queued', manifest: { cache_version: 2 } });
    expect(fresh.plan.entries.find((e) => e.clip_id === 'source')?.status).toBe('queued');
    expect(await t.services.storage.stat(`${row!.cache_key}/frames.bin`)).toBeUndefined();
  }, 180_000);

  it('error: validates the settings (documented ranges, strict snake_case) and answers 404 for an avatar not of the workspace', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const { avatarId } = await readyAvatar(t, tenantId);
    const other = await t.newTenant();
    const theirs = await readyAvatar(t, other.tenantId);
    const cases: [unknown, string][] = [
      [{ avatar_id: avatarId, video_cache: { fps: 4 } }, 'video_cache.fps'],
      [{ avatar_id: avatarId, video_cache: { fps: 61 } }, 'video_cache.fps'],
      [{ avatar_id: avatarId, video_cache: { fps: 12.5 } }, 'video_cache.fps'],
      [{ avatar_id: avatarId, video_cache: { width: 63 } }, 'video_cache.width'],
      [{ avatar_id: avatarId, video_cache: { width: 129 } }, 'video_cache.width'],
      [{ avatar_id: avatarId, video_cache: { height: 2048 } }, 'video_cache.height'],
      [{ avatar_id: avatarId, video_cache: { quality: 101 } }, 'video_cache.quality'],
      [{ avatar_id: avatarId, video_cache: { bitrate: 5 } }, 'video_cache.bitrate'],
      [{ avatar_id: avatarId, videoCache: { fps: 10 } }, 'videoCache'],
      [{ avatar_id: avatarId, video_cache: 'small' }, 'video_cache'],
      [{ video_cache: {} }, 'avatar_id'],
    ];
    for (const [body, field] of cases) {
      const res = await t.request('POST', PLAN, { key: apiKey, body });
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect((await json(res)).field, JSON.stringify(body)).toBe(field);
    }
    for (const id of ['ava_nope', theirs.avatarId]) {
      const res = await t.request('POST', PLAN, { key: apiKey, body: { avatar_id: id } });
      expect(res.status).toBe(404);
    }
    expect(await t.services.sql`select 1 from video_cache_entries where tenant_id = ${tenantId}`).toHaveLength(0);
  });

  it('happy: an avatar still generating its loop: queued, its loop waiting, nothing enqueued', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const { avatarId } = await readyAvatar(t, tenantId, { status: 'preprocessing' });
    const p = await json<Plan>(
      await t.request('POST', PLAN, { key: apiKey, body: { avatar_id: avatarId, video_cache: { fps: 10 } } }),
    );
    expect(p).toMatchObject({
      status: 'queued',
      plan: { queued: 0, entries: [{ clip_id: 'source', status: 'waiting' }] },
      manifest: { entries: [], cache_version: 0 },
    });
  });
});
