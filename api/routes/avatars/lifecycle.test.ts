import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { DEFAULT_CLIPS } from '../../../clips/declaration/default-clips.ts';
import { AVATAR_CLIPS_JOB } from '../../../core/avatars/types.ts';
import { MICROS_PER_SECOND } from '../../../core/credits/ledger.ts';
import { startJobWorkers } from '../../../core/wiring/job-workers.ts';
import { testApi, waitFor } from '../../../test/helpers.ts';
import { call, portraitAsset, type AvatarBody } from './test-support.ts';

/**
 * Background generation end to end, with a job worker in this process (renders in child
 * processes): 2-second loops and two default clips keep the file fast.
 */
const CLIPS = ['nod', 'smile'];
const t = await testApi({
  env: {
    AVATAR_LOOP_SECONDS: '2',
    DEFAULT_MOTION_CLIPS: CLIPS.join(','),
    JOB_POLL_SECONDS: '1',
    JOB_RETRY_DELAY_SECONDS: '1',
    LOOP_GENERATION_CREDIT_MICROS: String(30 * MICROS_PER_SECOND),
  },
});
const workers = await startJobWorkers(t.services);
afterAll(async () => {
  await workers.stop({ timeoutMs: 2000 });
  await t.close();
});
const A = '/api/v1/avatars';

/**
 * Waits until the avatar satisfies `done`, reading it where the API does (the avatar service, so
 * the wait spends none of the key's rate limit however long the renders take), then returns the
 * API's own answer.
 */
async function until(key: string, id: string, done: (a: AvatarBody) => boolean): Promise<AvatarBody> {
  const [row] = await t.services.sql<{ tenant_id: string }[]>`select tenant_id from avatars where id = ${id}`;
  let last: AvatarBody | undefined;
  await waitFor(
    () => `avatar ${id}; last: ${JSON.stringify(last)}`,
    async () => {
      last = JSON.parse(JSON.stringify(await t.services.avatars.get(row!.tenant_id, id))) as AvatarBody;
      return done(last) ? true : undefined;
    },
  );
  const r = await call(t, key, 'GET', `${A}/${id}`);
  expect(r.status).toBe(200);
  expect(done(r.body), JSON.stringify(r.body)).toBe(true);
  return r.body;
}

/** The serving loop's bytes, fetched through the app's signed media route as a client would. */
async function servedBytes(url: string): Promise<Buffer> {
  const u = new URL(url);
  const res = await t.app.request(u.pathname + u.search);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('video/mp4');
  return Buffer.from(await res.arrayBuffer());
}

function ffprobe(bytes: Buffer): { codec: string; duration: number; width: number; height: number } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'loop-probe-'));
  const file = path.join(dir, 'loop.mp4');
  writeFileSync(file, bytes);
  const out = JSON.parse(
    execFileSync('ffprobe', [
      '-v',
      'error',
      '-select_streams',
      'v:0',
      '-show_entries',
      'stream=codec_name,width,height:format=duration',
      '-of',
      'json',
      file,
    ]).toString(),
  ) as { streams: { codec_name: string; width: number; height: number }[]; format: { duration: string } };
  return {
    codec: out.streams[0]!.codec_name,
    width: out.streams[0]!.width,
    height: out.streams[0]!.height,
    duration: Number(out.format.duration),
  };
}

interface LibraryClip {
  clipId: string;
  status: string;
  url: string | null;
  motionPrompt: string | null;
  durationSeconds: number | null;
  error: string | null;
}
const library = (a: AvatarBody) => (a as unknown as { motionLibrary: LibraryClip[] }).motionLibrary;

async function clipRows(avatarId: string) {
  return [
    ...(await t.services.sql<
      { clip_id: string; status: string; generation_id: string | null; mp4_key: string | null; updated_at: Date }[]
    >`
    select clip_id, status, generation_id, mp4_key, updated_at from avatar_clips where avatar_id = ${avatarId} order by clip_id`),
  ];
}

// Renders run for real: on a loaded machine a test takes minutes, so the waits, not the clock, decide.
describe('avatar lifecycle (background generation)', { timeout: 300_000 }, () => {
  let key = '';
  let tenantId = '';
  let avatar: AvatarBody;

  it('happy: create with a portrait, poll until ready; servingUrl serves an H.264 loop', async () => {
    ({ apiKey: key, tenantId } = await t.newTenant({ credits: 100 }));
    const asset = await portraitAsset(t, tenantId, { fixture: 'astronaut' });
    const created = await call(t, key, 'POST', A, {
      displayName: 'Eileen',
      sourceKind: 'image',
      sourceAssetId: asset,
      motionPrompt: 'calm and friendly',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ status: 'preprocessing', idleVideoStatus: 'queued', servingUrl: null });
    const seen = new Set<string>();
    avatar = await until(key, created.body.id, (a) => {
      seen.add(a.idleVideoStatus);
      return a.status !== 'preprocessing';
    });
    expect(avatar, JSON.stringify(avatar)).toMatchObject({
      status: 'ready',
      idleVideoStatus: 'ready',
      error: null,
      cacheVersion: 1,
      sourceKind: 'video',
    });
    expect([...seen].every((s) => ['queued', 'generating', 'ready'].includes(s))).toBe(true);
    expect(avatar.cacheManifestId).toMatch(/^cmf_/);
    expect(avatar.servingUrl).toBeTruthy();
    const [row] = await t.services.sql`select serving_loop_key, serving_cache_key from avatars where id = ${avatar.id}`;
    expect(row!.serving_loop_key).toMatch(
      new RegExp(`^tenants/${tenantId}/avatars/${avatar.id}/loops/gen_\\w+/idle\\.mp4$`),
    );
    const probe = ffprobe(await servedBytes(avatar.servingUrl!));
    expect(probe.codec).toBe('h264');
    expect(probe.width).toBe(512);
    expect(probe.duration).toBeGreaterThan(1.8);
    expect(probe.duration).toBeLessThan(2.3);
    expect(await t.services.storage.stat(`${row!.serving_cache_key as string}/manifest.json`)).toBeDefined();
  });

  let clipsBefore: Awaited<ReturnType<typeof clipRows>> = [];

  it('happy: the default motion library renders in the background once the loop publishes', async () => {
    // Queued with the loop's publish (the avatar is ready before its clips are).
    expect(library(avatar).map((c) => c.clipId)).toEqual(CLIPS);
    const done = await until(key, avatar.id, (a) =>
      library(a).every((c) => c.status !== 'queued' && c.status !== 'rendering'),
    );
    expect(done.status).toBe('ready');
    for (const clip of library(done)) {
      const def = DEFAULT_CLIPS.find((c) => c.clipId === clip.clipId)!;
      expect(clip, JSON.stringify(clip)).toMatchObject({
        status: 'ready',
        error: null,
        motionPrompt: def.motionPrompt,
        durationSeconds: def.durationSeconds,
      });
      const probe = ffprobe(await servedBytes(clip.url!));
      expect(probe).toMatchObject({ codec: 'h264', width: 512, height: 512 });
      expect(Math.abs(probe.duration - def.durationSeconds)).toBeLessThanOrEqual(1 / 25 + 1e-3);
    }
    clipsBefore = await clipRows(avatar.id);
    for (const r of clipsBefore) {
      expect(r.mp4_key).toBe(`tenants/${tenantId}/avatars/${avatar.id}/clips/${r.clip_id}/${r.generation_id}/clip.mp4`);
    }
    const [row] = await t.services
      .sql`select count(*)::int as n, bool_and(is_default) as d from avatar_clips where avatar_id = ${avatar.id}`;
    expect(row).toMatchObject({ n: CLIPS.length, d: true });
    // The clip-library GET shows the same rows (generated, ready, serving) at revision 0.
    const lib = await call(t, key, 'GET', `${A}/${avatar.id}/clips`);
    expect(lib.status).toBe(200);
    const env = lib.body as unknown as {
      data: { clipId: string; status: string; source: string; url: string | null }[];
      revision: number;
      clipLibraryEligible: boolean;
    };
    expect(env).toMatchObject({ revision: 0, clipLibraryEligible: true });
    expect(env.data.map((c) => [c.clipId, c.status, c.source, c.url !== null])).toEqual(
      CLIPS.map((id) => [id, 'ready', 'generated', true]),
    );
  });

  it('happy: PUT loop answers 202 and keeps serving the previous loop until the new one publishes; billed once', async () => {
    const before = await t.services.ledger.balance(tenantId);
    const oldUrl = new URL(avatar.servingUrl!).pathname;
    const headers = { 'idempotency-key': 'redirect-1' };
    const r = await call(
      t,
      key,
      'PUT',
      `${A}/${avatar.id}/loop`,
      { motionPrompt: 'lively, smiling, glances aside' },
      headers,
    );
    expect(r.status).toBe(202);
    expect(r.body).toMatchObject({
      status: 'ready',
      idleVideoStatus: 'queued',
      cacheVersion: 1,
      motionPrompt: 'calm and friendly',
    });
    expect(new URL(r.body.servingUrl!).pathname).toBe(oldUrl);

    // Replay of the same key and body: the stored 202, without a second render or charge.
    const replay = await call(
      t,
      key,
      'PUT',
      `${A}/${avatar.id}/loop`,
      { motionPrompt: 'lively, smiling, glances aside' },
      headers,
    );
    expect(replay.status).toBe(202);
    expect(replay.body).toEqual(r.body);
    const reuse = await call(t, key, 'PUT', `${A}/${avatar.id}/loop`, { motionPrompt: 'something else' }, headers);
    expect(reuse.status).toBe(409);
    expect(reuse.body.code).toBe('idempotency_conflict');
    // Another render while this one is pending.
    const pending = await call(t, key, 'PUT', `${A}/${avatar.id}/loop`, { motionPrompt: 'nod' });
    expect(pending.status).toBe(409);
    expect(pending.body.code).toBe('loop_pending');

    const mid = await call(t, key, 'GET', `${A}/${avatar.id}`);
    expect(mid.body.status).toBe('ready');
    if (mid.body.idleVideoStatus !== 'ready') expect(new URL(mid.body.servingUrl!).pathname).toBe(oldUrl);

    const done = await until(key, avatar.id, (a) => a.idleVideoStatus === 'ready');
    expect(done).toMatchObject({
      status: 'ready',
      cacheVersion: 2,
      motionPrompt: 'lively, smiling, glances aside',
      error: null,
    });
    expect(new URL(done.servingUrl!).pathname).not.toBe(oldUrl);
    // The loop is published before its charge settles (another step): wait for the settlement.
    await waitFor('the loop render to be settled', async () => {
      const rows = await t.services
        .sql`select status from session_usage where tenant_id = ${tenantId} and kind = 'generation'`;
      return rows.length > 0 && rows.every((u) => u.status === 'released' || u.status === 'failed') ? true : undefined;
    });
    const after = await t.services.ledger.balance(tenantId);
    expect(before.balanceCreditMicros - after.balanceCreditMicros).toBe(30 * MICROS_PER_SECOND);
    expect(after.reservedCreditMicros).toBe(0);
    const usage = await t.services
      .sql`select status, billed_credit_micros from session_usage where tenant_id = ${tenantId} and kind = 'generation'`;
    expect(usage.map((u) => [u.status, u.billed_credit_micros])).toEqual([['released', 30 * MICROS_PER_SECOND]]);
    // The previous loop's objects are gone once the new one serves.
    expect(await t.services.storage.stat(decodeURIComponent(oldUrl.replace(/^\/media\//, '')))).toBeUndefined();
    expect(
      (await t.app.request(new URL(avatar.servingUrl!).pathname + new URL(avatar.servingUrl!).search)).status,
    ).toBe(404);
    // The re-direction neither adds nor re-renders clips.
    expect(await clipRows(avatar.id)).toEqual(clipsBefore);
    const jobs = await t.services
      .sql`select count(*)::int as n from pgboss.job where name = ${AVATAR_CLIPS_JOB} and data->>'avatarId' = ${avatar.id}`;
    expect(jobs[0]!.n).toBe(CLIPS.length);
    expect(library(done).map((c) => c.status)).toEqual(CLIPS.map(() => 'ready'));
  });

  it("edge: a deleted avatar's pending clip job completes without writing", async () => {
    const { tenantId: tid } = await t.newTenant();
    const asset = await portraitAsset(t, tid);
    await t.services.sql`
      insert into avatars (id, tenant_id, display_name, source_asset_id, status, idle_video_status, deleted_at)
      values ('ava_deletedclips', ${tid}, 'gone', ${asset}, 'deleted', 'ready', now())`;
    await t.services.sql`
      insert into avatar_clips (avatar_id, clip_id, status, source_kind, motion_prompt, duration_seconds, is_default)
      values ('ava_deletedclips', 'nod', 'queued', 'generated', 'nod', 4, true)`;
    const before = await clipRows('ava_deletedclips');
    const put = vi.spyOn(t.services.storage, 'put');
    try {
      const jobId = await t.services.jobs.enqueue(AVATAR_CLIPS_JOB, {
        tenantId: tid,
        avatarId: 'ava_deletedclips',
        clipId: 'nod',
        reviewed: false,
      });
      await waitFor('the clip job to complete', async () => {
        const [job] = await t.services.sql`select state from pgboss.job where id = ${jobId!}`;
        return job?.state === 'completed' ? true : undefined;
      });
      expect(put.mock.calls.filter(([k]) => k.includes('ava_deletedclips'))).toEqual([]);
    } finally {
      put.mockRestore();
    }
    expect(await clipRows('ava_deletedclips')).toEqual(before);
  });

  it('error: 402 when credits are short, 422 for a refused prompt and for a draft; nothing written or billed', async () => {
    const poor = await t.newTenant({ credits: 10 });
    const asset = await portraitAsset(t, poor.tenantId);
    await t.services.sql`
      insert into avatars (id, tenant_id, display_name, source_asset_id, status, idle_video_status, serving_loop_key, cache_version)
      values ('ava_poorready', ${poor.tenantId}, 'p', ${asset}, 'ready', 'ready', 'tenants/x/avatars/ava_poorready/loops/gen_x/idle.mp4', 1)`;
    const short = await call(t, poor.apiKey, 'PUT', `${A}/ava_poorready/loop`, { motionPrompt: 'nod' });
    expect(short.status).toBe(402);
    expect(short.body.code).toBe('insufficient_credits');
    const rejected = await call(t, poor.apiKey, 'PUT', `${A}/ava_poorready/loop`, { motionPrompt: 'a gory beheading' });
    expect(rejected.status).toBe(422);
    expect(rejected.body.code).toBe('loop_prompt_rejected');
    for (const motionPrompt of ['', '   ', 'x'.repeat(1201)]) {
      expect((await call(t, poor.apiKey, 'PUT', `${A}/ava_poorready/loop`, { motionPrompt })).body.code).toBe(
        'loop_prompt_rejected',
      );
    }
    const d = await call(t, poor.apiKey, 'POST', A, { displayName: 'draft' });
    const notGen = await call(t, poor.apiKey, 'PUT', `${A}/${d.body.id}/loop`, { motionPrompt: 'nod' });
    expect(notGen.status).toBe(422);
    expect(notGen.body.code).toBe('loop_not_generatable');
    expect((await call(t, poor.apiKey, 'GET', `${A}/ava_poorready`)).body).toMatchObject({
      idleVideoStatus: 'ready',
      cacheVersion: 1,
    });
    const bal = await t.services.ledger.balance(poor.tenantId);
    expect(bal).toMatchObject({ balanceCreditMicros: 10 * MICROS_PER_SECOND, reservedCreditMicros: 0 });
    expect(
      (await t.services.sql`select count(*)::int as n from session_usage where tenant_id = ${poor.tenantId}`)[0]!.n,
    ).toBe(0);
  });

  it('error: a portrait the rig refuses fails the avatar with its reason, without retry', async () => {
    const { apiKey, tenantId: tid } = await t.newTenant();
    const asset = await portraitAsset(t, tid, { fixture: 'brick' });
    const created = await call(t, apiKey, 'POST', A, { displayName: 'wall', sourceAssetId: asset });
    const failed = await until(apiKey, created.body.id, (a) => a.status !== 'preprocessing');
    expect(failed).toMatchObject({ status: 'failed', idleVideoStatus: 'failed', servingUrl: null });
    expect(failed.error).toMatch(/no_face/);
    expect(library(failed)).toEqual([]); // no loop published: no clips queued
    // pg-boss records completion just after the handler returns: poll for it.
    const job = await waitFor('the loop job to leave the active state', async () => {
      const [j] = await t.services
        .sql`select state, retry_count from pgboss.job where name = 'avatar-loop' and data->>'avatarId' = ${failed.id}`;
      return j?.state === 'active' ? undefined : j;
    });
    expect(job).toMatchObject({ state: 'completed', retry_count: 0 });
  });

  it('happy: a portrait swap moves the clip anchor and re-renders every clip from the new portrait', async () => {
    const before = await clipRows(avatar.id);
    const lib0 = (await call(t, key, 'GET', `${A}/${avatar.id}/clips`)).body as unknown as {
      anchorVersion: number;
      revision: number;
    };
    const grace = await portraitAsset(t, tenantId, { fixture: 'grace_hopper' });
    const swapped = await call(t, key, 'PATCH', `${A}/${avatar.id}`, { sourceAssetId: grace });
    expect(swapped.status, JSON.stringify(swapped.body)).toBe(200);
    const lib1 = (await call(t, key, 'GET', `${A}/${avatar.id}/clips`)).body as unknown as { anchorVersion: number };
    expect(lib1.anchorVersion).toBe(lib0.anchorVersion + 1);
    // A review made against the old anchor is stale.
    const stale = await call(t, key, 'POST', `${A}/${avatar.id}/clips/review`, {
      clipId: 'nod',
      uploadAssetId: grace,
      expectedRevision: lib0.revision,
      expectedAnchorVersion: lib0.anchorVersion,
      reason: 'looks right to me',
    });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ currentAnchorVersion: lib1.anchorVersion });
    // Every clip renders again, for the new anchor, with new outputs.
    const done = await until(
      key,
      avatar.id,
      (a) => a.status === 'ready' && library(a).every((c) => c.status === 'ready'),
    );
    expect(library(done).map((c) => c.clipId)).toEqual(CLIPS);
    const after = await clipRows(avatar.id);
    for (const r of after) {
      const old = before.find((b) => b.clip_id === r.clip_id)!;
      expect(r.generation_id).not.toBe(old.generation_id);
    }
    const [row] = await t.services
      .sql`select count(*)::int as n from avatar_clips where avatar_id = ${avatar.id} and anchor_version = ${lib1.anchorVersion}`;
    expect(row!.n).toBe(CLIPS.length);
  });
});
