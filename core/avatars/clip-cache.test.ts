import { text } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, portraitAsset } from '../../api/routes/avatars/test-support.ts';
import type { FrameCacheManifest } from '../../render/framecache/index.ts';
import { testVideo } from '../../render/framecache/test-videos.ts';
import { testApi, waitFor } from '../../test/helpers.ts';
import { ClipCacheWorker } from './clip-cache.ts';
import { ClipWorker } from './clips.ts';
import { loadAvatarPlayback } from './playback.ts';
import { RenderProcesses } from './render-process.ts';
import { stillMp4 } from './test-support.ts';

/**
 * Frame caches of accepted uploaded clips, end to end on the durable job queue: a declared upload
 * is pose-validated (avatar-clips job), accepted, and its frame cache job (avatar-clip-cache)
 * builds the cache from the stored MP4 with the real ffmpeg and face rig, so a call can play it.
 */
const t = await testApi();
const renders = new RenderProcesses();
const deps = {
  sql: t.services.sql,
  jobs: t.services.jobs,
  storage: t.services.storage,
  log: t.services.log,
  renders,
  concurrency: 1,
};
const cacheWorker = new ClipCacheWorker(deps);
beforeAll(async () => {
  // Only the clip workers: the avatar's loop job stays queued (no loop renders here).
  await new ClipWorker({ ...deps, assets: t.services.portraitAssets }).start();
  await cacheWorker.start();
});
afterAll(async () => {
  await t.close();
  renders.killAll();
});
const A = '/api/v1/avatars';

async function videoAsset(tenantId: string, bytes: Buffer): Promise<string> {
  return t.storeAsset(tenantId, bytes, { kind: 'video', contentType: 'video/mp4' });
}

/** An avatar from the astronaut portrait with `video` declared as its uploaded clip `intro`. */
async function declare(video: Buffer) {
  const { apiKey, tenantId } = await t.newTenant();
  const portrait = await portraitAsset(t, tenantId);
  const r = await call(t, apiKey, 'POST', A, { displayName: 'Ada', sourceKind: 'image', sourceAssetId: portrait });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  const avatarId = r.body.id;
  const upload = await videoAsset(tenantId, video);
  const put = await call(t, apiKey, 'PUT', `${A}/${avatarId}/clips`, {
    expectedRevision: 0,
    clips: { intro: { source: { assetId: upload } } },
  });
  expect(put.status, JSON.stringify(put.body)).toBe(202);
  return { key: apiKey, tenantId, avatarId, upload };
}

interface ClipRow {
  status: string;
  mp4_key: string | null;
  cache_key: string | null;
  generation_id: string | null;
  error: string | null;
  pose_check: { verdict?: string } | null;
}
const clipRow = async (avatarId: string) =>
  (
    await t.services.sql<
      ClipRow[]
    >`select status, mp4_key, cache_key, generation_id, error, pose_check from avatar_clips where avatar_id = ${avatarId} and clip_id = 'intro'`
  )[0]!;

const manifestOf = async (cacheKey: string) =>
  JSON.parse(await text(await t.services.storage.get(`${cacheKey}/manifest.json`))) as FrameCacheManifest;

describe('frame caches of accepted uploaded clips (avatar-clip-cache job)', { timeout: 300_000 }, () => {
  it('an accepted upload becomes playable: cache_key set under its generation, the loop size and rate, availability ready', async () => {
    const s = await declare(stillMp4('astronaut'));
    const row = await waitFor('the clip cache', async () => {
      const r = await clipRow(s.avatarId);
      return r.cache_key || r.status === 'failed' ? r : undefined;
    });
    expect(row, JSON.stringify(row)).toMatchObject({
      status: 'ready',
      error: null,
      pose_check: { verdict: 'accepted' },
    });
    expect(row.cache_key).toBe(`tenants/${s.tenantId}/avatars/${s.avatarId}/clips/intro/${row.generation_id}/cache`);
    // No loop published yet: the loop worker's settings (25 fps, 512x512); a clip of about a second.
    const m = await manifestOf(row.cache_key!);
    expect(m).toMatchObject({ kind: 'clip', loop: false, fps: 25, width: 512, height: 512, landmarkCount: 468 });
    expect(m.frameCount).toBeGreaterThanOrEqual(25);
    expect(m.frameCount).toBeLessThanOrEqual(30);
    expect(m.meta).toMatchObject({ generationId: row.generation_id, fit: 'pad' });
    const playback = await loadAvatarPlayback(t.services.sql, s.tenantId, s.avatarId);
    expect(playback!.clips.get('intro')).toEqual({ clipId: 'intro', cacheKey: row.cache_key, availability: 'ready' });
    expect(playback!.availability('intro')).toBe('ready');
  });

  it("a clip accepted by a person's review gets its cache too, at the serving loop's settings", async () => {
    const s = await declare(stillMp4('astronaut', { rotateDeg: 25 }));
    await waitFor('the pose refusal', async () => ((await clipRow(s.avatarId)).status === 'failed' ? true : undefined));
    // As if the avatar's loop had published at 20 fps, 384x384.
    const loopKey = `tenants/${s.tenantId}/avatars/${s.avatarId}/loop/cache`;
    await t.services.storage.put(
      `${loopKey}/manifest.json`,
      Buffer.from(JSON.stringify({ fps: 20, width: 384, height: 384 })),
      { contentType: 'application/json' },
    );
    await t.services.sql`update avatars set serving_cache_key = ${loopKey} where id = ${s.avatarId}`;
    const review = {
      clipId: 'intro',
      uploadAssetId: s.upload,
      expectedRevision: 1,
      expectedAnchorVersion: 1,
      reason: 'The tilt is intended',
    };
    const r = await call(t, s.key, 'POST', `${A}/${s.avatarId}/clips/review`, review);
    expect(r.status, JSON.stringify(r.body)).toBe(204);
    const row = await waitFor('the reviewed clip cache', async () => {
      const x = await clipRow(s.avatarId);
      return x.cache_key || x.error ? x : undefined;
    });
    expect(row, JSON.stringify(row)).toMatchObject({ status: 'ready', error: null });
    const m = await manifestOf(row.cache_key!);
    expect(m).toMatchObject({ fps: 20, width: 384, height: 384 });
    expect(m.frameCount).toBeGreaterThanOrEqual(20);
    expect(m.frameCount).toBeLessThanOrEqual(24);
    expect((await loadAvatarPlayback(t.services.sql, s.tenantId, s.avatarId))!.clips.get('intro')!.availability).toBe(
      'ready',
    );
  });

  it('an upload the pose check accepts but the cache builder refuses (face gone for over a second) fails with the reason', async () => {
    // First, middle and last frames (what the pose check samples) show the face; 1.2 s in between do not.
    const s = await declare(testVideo({ seconds: 4, blackout: [50, 80] }));
    const row = await waitFor('the refusal', async () => {
      const x = await clipRow(s.avatarId);
      return x.status === 'failed' ? x : undefined;
    });
    expect(row.pose_check?.verdict).toBe('accepted');
    expect(row.cache_key).toBeNull();
    expect(row.error).toBe(
      'The clip cannot be prepared for playback (face_missing): The face is missing for more than 1 s at a stretch (from 2.00 s)',
    );
    expect((await loadAvatarPlayback(t.services.sql, s.tenantId, s.avatarId))!.clips.get('intro')!.availability).toBe(
      'failed',
    );
  });

  it('a stale job (the clip re-declared since) writes nothing and changes nothing', async () => {
    const s = await declare(stillMp4('astronaut'));
    const first = await waitFor('the clip cache', async () => {
      const r = await clipRow(s.avatarId);
      return r.cache_key ? r : undefined;
    });
    // The clip is retired by a new declaration; the old generation's job runs again.
    expect((await call(t, s.key, 'PUT', `${A}/${s.avatarId}/clips`, { expectedRevision: 1, clips: {} })).status).toBe(
      202,
    );
    await t.services.sql`update avatar_clips set cache_key = null where avatar_id = ${s.avatarId}`;
    await cacheWorker.run(
      { tenantId: s.tenantId, avatarId: s.avatarId, clipId: 'intro', generationId: first.generation_id! },
      { id: 'job_test', retryCount: 0, retryLimit: 3 },
    );
    expect(await clipRow(s.avatarId)).toMatchObject({ cache_key: null, status: 'ready' });
    // Another tenant's id in the job finds nothing either.
    const other = await t.newTenant();
    await cacheWorker.run(
      { tenantId: other.tenantId, avatarId: s.avatarId, clipId: 'intro', generationId: first.generation_id! },
      { id: 'job_test', retryCount: 0, retryLimit: 3 },
    );
    expect((await clipRow(s.avatarId)).cache_key).toBeNull();
  });
});
