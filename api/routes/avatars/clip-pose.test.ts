import { afterAll, describe, expect, it } from 'vitest';
import { ClipWorker } from '../../../core/avatars/clips.ts';
import { RenderProcesses } from '../../../core/avatars/render-process.ts';
import { stillMp4 } from '../../../core/avatars/test-support.ts';
import { testApi } from '../../../test/helpers.ts';
import { call, portraitAsset } from './test-support.ts';

/** Pose validation of uploaded clips (the `avatar-clips` job on an upload row), run by hand here. */
const t = await testApi();
afterAll(() => t.close());
const A = '/api/v1/avatars';

const worker = new ClipWorker({
  sql: t.services.sql,
  jobs: t.services.jobs,
  storage: t.services.storage,
  assets: t.services.portraitAssets,
  log: t.services.log,
  renders: new RenderProcesses(),
  concurrency: 1,
});
const job = { id: 'job_test', retryCount: 0, retryLimit: 3 };

async function uploadedVideo(tenantId: string, bytes: Buffer): Promise<string> {
  return t.storeAsset(tenantId, bytes, { kind: 'video', contentType: 'video/mp4' });
}

/** A tenant, an avatar from the astronaut portrait and one uploaded clip `intro` declared (queued, its job enqueued). */
async function declaredUpload(fixture: 'astronaut' | 'brick', o: { rotateDeg?: number } = {}) {
  const { apiKey, tenantId } = await t.newTenant();
  const portrait = await portraitAsset(t, tenantId);
  const r = await call(t, apiKey, 'POST', A, { displayName: 'Ada', sourceKind: 'image', sourceAssetId: portrait });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  const avatarId = r.body.id;
  const upload = await uploadedVideo(tenantId, stillMp4(fixture, o));
  const put = await call(t, apiKey, 'PUT', `${A}/${avatarId}/clips`, {
    expectedRevision: 0,
    clips: { intro: { source: { assetId: upload } } },
  });
  expect(put.status, JSON.stringify(put.body)).toBe(202);
  const [jobRow] = await t.services
    .sql`select 1 from pgboss.job where name = 'avatar-clips' and data->>'avatarId' = ${avatarId} and data->>'clipId' = 'intro'`;
  expect(jobRow).toBeDefined();
  return { key: apiKey, tenantId, avatarId, upload, url: `${A}/${avatarId}/clips` };
}

async function intro(key: string, url: string) {
  const got = await call(t, key, 'GET', url);
  return (got.body as unknown as { data: Record<string, unknown>[] }).data.find((c) => c.clipId === 'intro')!;
}

describe('uploaded clip pose validation (avatar-clips job)', () => {
  it('happy: a clip of the portrait passes: ready, served from the clip prefix, verdict accepted', async () => {
    const s = await declaredUpload('astronaut');
    await worker.run({ tenantId: s.tenantId, avatarId: s.avatarId, clipId: 'intro', reviewed: false }, job);
    const c = await intro(s.key, s.url);
    expect(c).toMatchObject({
      status: 'ready',
      source: 'upload',
      uploadAssetId: s.upload,
      error: null,
      poseCheck: { verdict: 'accepted' },
    });
    expect(c.url).toEqual(expect.any(String));
    const [row] = await t.services.sql<
      { mp4_key: string }[]
    >`select mp4_key from avatar_clips where avatar_id = ${s.avatarId} and clip_id = 'intro'`;
    expect(row!.mp4_key).toContain(`/avatars/${s.avatarId}/clips/intro/`);
    expect(await t.services.storage.stat(row!.mp4_key)).toBeDefined();
  });

  it('refused: a clip without a face fails with the rig code in pose_check and no url', async () => {
    const s = await declaredUpload('brick');
    await worker.run({ tenantId: s.tenantId, avatarId: s.avatarId, clipId: 'intro', reviewed: false }, job);
    const c = await intro(s.key, s.url);
    expect(c).toMatchObject({ status: 'failed', url: null, poseCheck: { verdict: 'refused', code: 'no_face' } });
    expect(c.error).toEqual(expect.stringContaining('face rig'));
  });

  it('edge: a job for a clip re-declared or retired since does nothing', async () => {
    const s = await declaredUpload('astronaut');
    expect((await call(t, s.key, 'PUT', s.url, { expectedRevision: 1, clips: {} })).status).toBe(202);
    await worker.run({ tenantId: s.tenantId, avatarId: s.avatarId, clipId: 'intro', reviewed: false }, job);
    const [row] = await t.services.sql<{ status: string; pose_check: unknown }[]>`
      select status, pose_check from avatar_clips where avatar_id = ${s.avatarId} and clip_id = 'intro'`;
    expect(row).toMatchObject({ status: 'queued', pose_check: null });
  });
});

describe('POST /avatars/{id}/clips/review', () => {
  const body = (s: { upload: string }, o: Record<string, unknown> = {}) => ({
    clipId: 'intro',
    uploadAssetId: s.upload,
    expectedRevision: 1,
    expectedAnchorVersion: 1,
    reason: 'Checked by hand: the tilt reads fine',
    ...o,
  });
  const runJob = (s: { tenantId: string; avatarId: string }) =>
    worker.run({ tenantId: s.tenantId, avatarId: s.avatarId, clipId: 'intro', reviewed: false }, job);

  it('happy: a pose refusal accepted by a person serves, the machine verdict kept with the review', async () => {
    const s = await declaredUpload('astronaut', { rotateDeg: 25 });
    await runJob(s);
    expect(await intro(s.key, s.url)).toMatchObject({
      status: 'failed',
      url: null,
      poseCheck: { verdict: 'pose_mismatch' },
    });
    const r = await call(t, s.key, 'POST', `${s.url}/review`, body(s));
    expect(r.status, JSON.stringify(r.body)).toBe(204);
    const c = await intro(s.key, s.url);
    expect(c).toMatchObject({
      status: 'ready',
      error: null,
      poseCheck: {
        verdict: 'pose_mismatch',
        review: { reason: 'Checked by hand: the tilt reads fine', by: expect.any(String), at: expect.any(String) },
      },
    });
    expect(c.url).toEqual(expect.any(String));
    // A second review finds it serving: 409.
    expect((await call(t, s.key, 'POST', `${s.url}/review`, body(s))).body).toMatchObject({
      code: 'avatar_state_conflict',
    });
  });

  it('happy: a clip still pending validation can be accepted; its late job then does nothing', async () => {
    const s = await declaredUpload('astronaut', { rotateDeg: 25 });
    const r = await call(t, s.key, 'POST', `${s.url}/review`, body(s));
    expect(r.status, JSON.stringify(r.body)).toBe(204);
    await runJob(s);
    expect(await intro(s.key, s.url)).toMatchObject({
      status: 'ready',
      poseCheck: { verdict: 'pending', review: { reason: expect.any(String) } },
    });
  });

  it('error: 409 on a stale revision or anchor version (with the current values); nothing changes', async () => {
    const s = await declaredUpload('astronaut', { rotateDeg: 25 });
    await runJob(s);
    const stale = await call(t, s.key, 'POST', `${s.url}/review`, body(s, { expectedRevision: 0 }));
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ code: 'revision_conflict', currentRevision: 1 });
    const anchor = await call(t, s.key, 'POST', `${s.url}/review`, body(s, { expectedAnchorVersion: 2 }));
    expect(anchor.status).toBe(409);
    expect(anchor.body).toMatchObject({ code: 'avatar_state_conflict', currentAnchorVersion: 1 });
    const other = await call(t, s.key, 'POST', `${s.url}/review`, body(s, { uploadAssetId: 'asset_other' }));
    expect(other.body).toMatchObject({ code: 'avatar_state_conflict' });
    expect(await intro(s.key, s.url)).toMatchObject({ status: 'failed', poseCheck: { verdict: 'pose_mismatch' } });
  });

  it('error: a clip refused for no face cannot be reviewed (409); it stays failed', async () => {
    const s = await declaredUpload('brick');
    await runJob(s);
    const r = await call(t, s.key, 'POST', `${s.url}/review`, body(s));
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ code: 'avatar_state_conflict' });
    expect((r.body as unknown as { error: string }).error).toContain('stays refused');
    expect(await intro(s.key, s.url)).toMatchObject({
      status: 'failed',
      url: null,
      poseCheck: { verdict: 'refused', code: 'no_face' },
    });
  });

  it('error: 422 on a reason under 5 characters, an unknown field or a missing one; 413 over 4 KiB', async () => {
    const s = await declaredUpload('astronaut');
    for (const b of [
      body(s, { reason: 'ok' }),
      body(s, { reason: 'x'.repeat(501) }),
      { ...body(s), extra: 1 },
      { clipId: 'intro' },
    ]) {
      const r = await call(t, s.key, 'POST', `${s.url}/review`, b);
      expect(r.status, JSON.stringify(b)).toBe(422);
    }
    const big = await call(t, s.key, 'POST', `${s.url}/review`, body(s, { reason: 'y'.repeat(5000) }));
    expect(big.status).toBe(413);
  });

  it("isolation: another tenant's avatar, an unknown avatar or clip is 404", async () => {
    const s = await declaredUpload('astronaut', { rotateDeg: 25 });
    await runJob(s);
    const other = await t.newTenant();
    const r = await call(t, other.apiKey, 'POST', `${s.url}/review`, body(s));
    expect(r.status).toBe(404);
    expect((await call(t, s.key, 'POST', `${A}/ava_doesnotexist/clips/review`, body(s))).status).toBe(404);
    expect((await call(t, s.key, 'POST', `${s.url}/review`, body(s, { clipId: 'nope' }))).status).toBe(404);
    expect(await intro(s.key, s.url)).toMatchObject({ status: 'failed' });
  });
});
