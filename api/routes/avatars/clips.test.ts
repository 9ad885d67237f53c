import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelopeToDeclaration, type ClipEnvelope } from '../../../clips/declaration/index.ts';
import { queueDefaultClips } from '../../../core/avatars/clips.ts';
import { DEFAULT_CLIPS } from '../../../clips/declaration/default-clips.ts';
import { newId } from '../../../core/platform/ids.ts';
import { testApi, type TestApi } from '../../../test/helpers.ts';
import { call, portraitAsset } from './test-support.ts';

/** GET/PUT /avatars/{id}/clips without a job worker (clip renders stay queued here; lifecycle.test.ts renders the defaults). */
const t = await testApi();
afterAll(() => t.close());
const A = '/api/v1/avatars';

type Envelope = ClipEnvelope & {
  plan?: { kept: string[]; queued: string[]; retired: string[] };
  code?: string;
  field?: string | null;
  currentRevision?: number;
};

async function api(key: string, method: string, url: string, body?: unknown, headers?: Record<string, string>) {
  const r = await call(t, key, method, url, body, headers);
  return { status: r.status, body: r.body as unknown as Envelope };
}

/** A tenant with an avatar from a ready portrait; `defaults` also queues the default motion library as the loop's publish does. */
async function setup(o: { defaults?: boolean } = {}) {
  const { apiKey, tenantId } = await t.newTenant();
  const asset = await portraitAsset(t, tenantId);
  const r = await call(t, apiKey, 'POST', A, { displayName: 'Ada', sourceKind: 'image', sourceAssetId: asset });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  const avatarId = r.body.id;
  if (o.defaults) {
    await t.services.sql.begin((tx) =>
      queueDefaultClips(tx, t.services.jobs, { tenantId, avatarId, reviewed: false }, DEFAULT_CLIPS),
    );
  }
  return { key: apiKey, tenantId, avatarId, asset, url: `${A}/${avatarId}/clips` };
}

async function videoAsset(
  tenantId: string,
  status: 'ready' | 'pending_upload' = 'ready',
  kind: 'video' | 'image' = 'video',
): Promise<string> {
  const id = newId('asset');
  await t.services.sql`
    insert into assets (id, tenant_id, kind, status, content_type, size_bytes, sha256, storage_key)
    values (${id}, ${tenantId}, ${kind}, ${status}, 'video/mp4', 10, 'x', ${`tenants/${tenantId}/assets/${id}/original.mp4`})`;
  return id;
}

async function clipJobs(avatarId: string): Promise<string[]> {
  const rows = await t.services.sql<{ clip_id: string }[]>`
    select data->>'clipId' as clip_id from pgboss.job where name = 'avatar-clips' and data->>'avatarId' = ${avatarId} order by created_on`;
  return rows.map((r) => r.clip_id).sort();
}

describe('GET /avatars/{id}/clips', () => {
  it('happy: the envelope with the default library rows, revision 0, anchor and eligibility', async () => {
    const s = await setup({ defaults: true });
    const r = await api(s.key, 'GET', s.url);
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual([
      'anchor',
      'anchorVersion',
      'avatarId',
      'behavior',
      'clipLibraryEligible',
      'data',
      'defaultSourceAssetId',
      'revision',
    ]);
    expect(r.body).toMatchObject({
      avatarId: s.avatarId,
      revision: 0,
      anchorVersion: 1,
      anchor: { kind: 'source_loop', sourceAssetId: s.asset, url: null },
      clipLibraryEligible: true,
      defaultSourceAssetId: s.asset,
      behavior: {},
    });
    expect(r.body.data.map((c) => c.clipId).sort()).toEqual(DEFAULT_CLIPS.map((c) => c.clipId).sort());
    for (const c of r.body.data) {
      const def = DEFAULT_CLIPS.find((d) => d.clipId === c.clipId)!;
      expect(Object.keys(c).sort()).toEqual(
        [
          'anchorVersion',
          'clipId',
          'createdAt',
          'durationSeconds',
          'error',
          'motionPrompt',
          'poseCheck',
          'source',
          'status',
          'updatedAt',
          'uploadAssetId',
          'url',
        ].sort(),
      );
      expect(c).toMatchObject({
        status: 'queued',
        url: null,
        source: 'generated',
        uploadAssetId: null,
        motionPrompt: def.motionPrompt,
        durationSeconds: def.durationSeconds,
        anchorVersion: 1,
        poseCheck: null,
        error: null,
      });
    }
  });

  it("isolation: another tenant's, a deleted or an unknown avatar is 404", async () => {
    const s = await setup({ defaults: true });
    const other = await t.newTenant();
    expect((await api(other.apiKey, 'GET', s.url)).body.code).toBe('not_found');
    expect((await api(other.apiKey, 'GET', s.url)).status).toBe(404);
    expect((await api(s.key, 'GET', `${A}/ava_doesnotexist/clips`)).status).toBe(404);
    expect((await call(t, s.key, 'DELETE', `${A}/${s.avatarId}`)).status).toBe(204);
    expect((await api(s.key, 'GET', s.url)).status).toBe(404);
  });

  it('edge: readable with the workspace switch off (clipLibraryEligible false), and false for a draft', async () => {
    const s = await setup({ defaults: true });
    await t.services.tenants.setSwitch(s.tenantId, 'clip_library', false);
    const r = await api(s.key, 'GET', s.url);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ clipLibraryEligible: false, revision: 0 });
    expect(r.body.data.length).toBe(DEFAULT_CLIPS.length);
    const d = await call(t, s.key, 'POST', A, { displayName: 'Draft', sourceKind: 'image' });
    const dr = await api(s.key, 'GET', `${A}/${d.body.id}/clips`);
    expect(dr.body).toMatchObject({ clipLibraryEligible: false, defaultSourceAssetId: null, data: [] });
  });
});

describe('PUT /avatars/{id}/clips', () => {
  const declaration = (expectedRevision: number, upload?: string) => ({
    expectedRevision,
    clips: {
      nod: { source: { motionPrompt: 'nod', durationSeconds: 4 } },
      sway: { source: { motionPrompt: 'sway gently', durationSeconds: 6 } },
      breathe: { source: { motionPrompt: 'breathe calmly' } },
      ear: { source: { motionPrompt: 'tilt head, listen' } },
      wave: { source: { motionPrompt: 'wave hello', durationSeconds: 4 } },
      ...(upload ? { intro: { source: { assetId: upload } } } : {}),
    },
    idle: { clips: ['sway', 'breathe'], weights: { source: 2, sway: 1 } },
    on: { userSpeechStarted: { clips: ['ear', 'nod'] } },
    actions: { greet: { description: 'Greet the user warmly', clips: upload ? ['wave', 'intro'] : ['wave'] } },
  });

  it('happy: declare, plan, GET shows it; the GET put back unchanged keeps everything and bumps the revision', async () => {
    const s = await setup({ defaults: true });
    const upload = await videoAsset(s.tenantId);
    const put = await api(s.key, 'PUT', s.url, declaration(0, upload));
    expect(put.status, JSON.stringify(put.body)).toBe(202);
    expect(put.body.plan).toEqual({
      kept: ['nod'],
      queued: ['sway', 'breathe', 'ear', 'wave', 'intro'],
      retired: ['listen', 'smile', 'think'],
    });
    expect(put.body.revision).toBe(1);
    expect(put.body.behavior).toEqual({
      idle: { clips: ['sway', 'breathe'], weights: { source: 2, sway: 1 } },
      on: { userSpeechStarted: { clips: ['ear', 'nod'] } },
      actions: { greet: { description: 'Greet the user warmly', clips: ['wave', 'intro'] } },
    });
    // One job per queued clip (the defaults' four plus five): renders for the generated ones, pose validation for the upload.
    expect(await clipJobs(s.avatarId)).toEqual(
      [...DEFAULT_CLIPS.map((c) => c.clipId), 'breathe', 'ear', 'intro', 'sway', 'wave'].sort(),
    );
    const [retired] = await t.services
      .sql`select count(*)::int as n from avatar_clips where avatar_id = ${s.avatarId} and retired_at is not null`;
    expect(retired!.n).toBe(3);

    const got = await api(s.key, 'GET', s.url);
    expect(got.status).toBe(200);
    const { plan: _plan, ...envelope } = put.body;
    expect(got.body).toEqual(envelope);
    const byId = Object.fromEntries(got.body.data.map((c) => [c.clipId, c]));
    expect(Object.keys(byId).sort()).toEqual(['breathe', 'ear', 'intro', 'nod', 'sway', 'wave']);
    expect(byId.breathe).toMatchObject({
      status: 'queued',
      source: 'generated',
      motionPrompt: 'breathe calmly',
      durationSeconds: 5,
    });
    expect(byId.intro).toMatchObject({
      status: 'queued',
      source: 'upload',
      uploadAssetId: upload,
      motionPrompt: null,
      poseCheck: null,
    });

    const round = envelopeToDeclaration(got.body);
    expect(round.needsPrompt).toEqual([]);
    const again = await api(s.key, 'PUT', s.url, round.body);
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body.plan).toMatchObject({ queued: [], retired: [] });
    expect([...again.body.plan!.kept].sort()).toEqual(['breathe', 'ear', 'intro', 'nod', 'sway', 'wave']);
    expect(again.body.revision).toBe(2);
    expect(again.body.behavior).toEqual(got.body.behavior);
    expect(await clipJobs(s.avatarId)).toHaveLength(9); // nothing enqueued

    // An empty declaration retires every clip and removes the behaviour.
    const empty = await api(s.key, 'PUT', s.url, { expectedRevision: 2, clips: {} });
    expect(empty.status).toBe(202);
    expect(empty.body).toMatchObject({ data: [], behavior: {}, revision: 3 });
    expect(empty.body.plan!.retired.sort()).toEqual(['breathe', 'ear', 'intro', 'nod', 'sway', 'wave']);
  });

  it('error: 409 revision_conflict with currentRevision for a stale expectedRevision; nothing written', async () => {
    const s = await setup();
    expect((await api(s.key, 'PUT', s.url, declaration(0))).status).toBe(202);
    const stale = await api(s.key, 'PUT', s.url, { expectedRevision: 0, clips: {} });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ code: 'revision_conflict', currentRevision: 1 });
    const got = await api(s.key, 'GET', s.url);
    expect(got.body.revision).toBe(1);
    expect(got.body.data).toHaveLength(5);
  });

  it('concurrency: of 5 concurrent PUTs with the same expectedRevision exactly one wins', async () => {
    const s = await setup();
    const answers = await Promise.all(
      [0, 1, 2, 3, 4].map((i) =>
        api(s.key, 'PUT', s.url, {
          expectedRevision: 0,
          clips: { [`c${i}`]: { source: { motionPrompt: `nod ${i}` } } },
        }),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([202, 409, 409, 409, 409]);
    for (const a of answers.filter((x) => x.status === 409))
      expect(a.body).toMatchObject({ code: 'revision_conflict', currentRevision: 1 });
    const got = await api(s.key, 'GET', s.url);
    expect(got.body.revision).toBe(1);
    expect(got.body.data).toHaveLength(1);
    expect(await clipJobs(s.avatarId)).toHaveLength(1);
  });

  it('error: 422 clip_declaration_rejected naming the field (schema, __proto__, screen, upload asset); nothing written', async () => {
    const s = await setup();
    const other = await t.newTenant();
    const cases: [unknown, string][] = [
      [
        { expectedRevision: 0, clips: { wave: { source: { motionPrompt: 'wave' } } }, idle: { clips: ['nope'] } },
        'idle.clips[0]',
      ],
      [
        { expectedRevision: 0, clips: { wave: { source: { motionPrompt: 'wave naked' } } } },
        'clips.wave.source.motionPrompt',
      ],
      [
        {
          expectedRevision: 0,
          clips: { wave: { source: { motionPrompt: 'wave' } } },
          actions: { a: { description: 'do gore things', clips: ['wave'] } },
        },
        'actions.a.description',
      ],
      [
        { expectedRevision: 0, clips: { up: { source: { assetId: await videoAsset(other.tenantId) } } } },
        'clips.up.source.assetId',
      ],
      [
        { expectedRevision: 0, clips: { up: { source: { assetId: await videoAsset(s.tenantId, 'pending_upload') } } } },
        'clips.up.source.assetId',
      ],
      [{ expectedRevision: 0, clips: { up: { source: { assetId: s.asset } } } }, 'clips.up.source.assetId'], // an image
    ];
    for (const [body, field] of cases) {
      const r = await api(s.key, 'PUT', s.url, body);
      expect(r.status, JSON.stringify(r.body)).toBe(422);
      expect(r.body).toMatchObject({ code: 'clip_declaration_rejected', field });
    }
    const proto = await t.request('PUT', s.url, {
      key: s.key,
      rawBody: '{"expectedRevision":0,"clips":{"__proto__":{"source":{"motionPrompt":"nod"}}}}',
      headers: { 'content-type': 'application/json' },
    });
    expect(proto.status).toBe(422);
    expect(await proto.json()).toMatchObject({ code: 'clip_declaration_rejected', field: 'clips.__proto__' });
    const got = await api(s.key, 'GET', s.url);
    expect(got.body).toMatchObject({ revision: 0, data: [] });
  });

  it('error: 403 clip_library_not_enabled with the switch off (and for a draft); nothing written', async () => {
    const s = await setup({ defaults: true });
    await t.services.tenants.setSwitch(s.tenantId, 'clip_library', false);
    const r = await api(s.key, 'PUT', s.url, { expectedRevision: 0, clips: {} });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('clip_library_not_enabled');
    expect((await api(s.key, 'GET', s.url)).body).toMatchObject({
      revision: 0,
      data: { length: DEFAULT_CLIPS.length },
    });
    await t.services.tenants.setSwitch(s.tenantId, 'clip_library', true);
    const d = await call(t, s.key, 'POST', A, { displayName: 'Draft', sourceKind: 'image' });
    expect((await api(s.key, 'PUT', `${A}/${d.body.id}/clips`, { expectedRevision: 0, clips: {} })).body.code).toBe(
      'clip_library_not_enabled',
    );
  });

  it("isolation: another tenant's avatar is 404 and unchanged", async () => {
    const s = await setup({ defaults: true });
    const other = await t.newTenant();
    const r = await api(other.apiKey, 'PUT', s.url, { expectedRevision: 0, clips: {} });
    expect(r.status).toBe(404);
    expect((await api(s.key, 'GET', s.url)).body).toMatchObject({
      revision: 0,
      data: { length: DEFAULT_CLIPS.length },
    });
  });

  it('idempotency: a replay returns the stored 202 without a second write; another body under the key is 409', async () => {
    const s = await setup();
    const h = { 'idempotency-key': 'clips-1' };
    const first = await api(s.key, 'PUT', s.url, declaration(0), h);
    expect(first.status).toBe(202);
    const replay = await api(s.key, 'PUT', s.url, declaration(0), h);
    expect(replay.status).toBe(202);
    expect(replay.body).toEqual(first.body);
    expect((await api(s.key, 'GET', s.url)).body.revision).toBe(1);
    const other = await api(s.key, 'PUT', s.url, { expectedRevision: 1, clips: {} }, h);
    expect(other.status).toBe(409);
    expect(other.body.code).toBe('idempotency_conflict');
  });
});

describe('PUT /avatars/{id}/clips and the default library', () => {
  it('edge: a declaration made before the first loop publishes (even an empty one) keeps the defaults out', async () => {
    const s = await setup();
    expect((await api(s.key, 'PUT', s.url, { expectedRevision: 0, clips: {} })).status).toBe(202);
    const n = await t.services.sql.begin((tx) =>
      queueDefaultClips(
        tx,
        t.services.jobs,
        { tenantId: s.tenantId, avatarId: s.avatarId, reviewed: false },
        DEFAULT_CLIPS,
      ),
    );
    expect(n).toBe(0);
    expect((await api(s.key, 'GET', s.url)).body).toMatchObject({ data: [], revision: 1 });
  });
});

describe('PUT /avatars/{id}/clips with an unreachable moderation endpoint', () => {
  let u: TestApi;
  beforeAll(async () => {
    u = await testApi({ env: { MODERATION_URL: 'http://127.0.0.1:1/moderations' } });
  });
  afterAll(() => u.close());

  it('error: 503 clip_screen_unavailable, retryable, nothing written; the Idempotency-Key is freed', async () => {
    const { apiKey, tenantId } = await u.newTenant();
    const asset = await portraitAsset(u, tenantId);
    const created = await call(u, apiKey, 'POST', A, { displayName: 'Ada', sourceKind: 'image', sourceAssetId: asset });
    expect(created.status).toBe(201);
    const url = `${A}/${created.body.id}/clips`;
    const body = { expectedRevision: 0, clips: { wave: { source: { motionPrompt: 'wave hello' } } } };
    for (let i = 0; i < 2; i++) {
      const r = await call(u, apiKey, 'PUT', url, body, { 'idempotency-key': 'screen-1' });
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ code: 'clip_screen_unavailable', retryable: true });
    }
    const got = await call(u, apiKey, 'GET', url);
    expect(got.body).toMatchObject({ revision: 0, data: [] });
    const [jobs] = await u.services
      .sql`select count(*)::int as n from pgboss.job where name = 'avatar-clips' and data->>'avatarId' = ${created.body.id}`;
    expect(jobs!.n).toBe(0);
  });
});
