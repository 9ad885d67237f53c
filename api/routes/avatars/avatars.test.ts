import { afterAll, describe, expect, it } from 'vitest';
import { sessionInstructions } from '../../../core/avatars/index.ts';
import { loadAvatarPlayback } from '../../../core/avatars/playback.ts';
import { testApi } from '../../../test/helpers.ts';
import { call, portraitAsset } from './test-support.ts';

/** CRUD and the PATCH rules, without a job worker (generation stays queued here; see lifecycle.test.ts). */
const t = await testApi();
afterAll(() => t.close());
const A = '/api/v1/avatars';

async function draft(key: string, body: Record<string, unknown> = {}) {
  const r = await call(t, key, 'POST', A, { displayName: 'Ada', sourceKind: 'image', ...body });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}

describe('POST /avatars', () => {
  it('happy: without a portrait the avatar is a draft with every documented field', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const a = await draft(apiKey, {
      defaultVoiceId: 'kal',
      metadata: { team: 'x' },
      settings: { a: 1 },
      voice: { provider: 'flite' },
      llm: { model: 'm' },
    });
    expect(a.id).toMatch(/^ava_[0-9A-Za-z]{20}$/);
    expect(a).toMatchObject({
      tenantId,
      displayName: 'Ada',
      sourceKind: 'image',
      modelId: 'builtin-rig-v1',
      sourceAssetId: null,
      status: 'draft',
      idleVideoStatus: 'none',
      servingUrl: null,
      error: null,
      defaultVoiceId: 'kal',
      cacheManifestId: null,
      cacheVersion: 0,
      metadata: { team: 'x' },
    });
    expect(Date.parse(a.createdAt)).toBeGreaterThan(0);
    const got = await call(t, apiKey, 'GET', `${A}/${a.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(a);
  });

  it('happy: with a ready image asset the avatar is preprocessing and its loop job is queued in the same transaction', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const asset = await portraitAsset(t, tenantId);
    const a = await draft(apiKey, { sourceAssetId: asset, motionPrompt: 'calm, smiling' });
    expect(a).toMatchObject({
      status: 'preprocessing',
      idleVideoStatus: 'queued',
      sourceAssetId: asset,
      motionPrompt: 'calm, smiling',
      servingUrl: null,
    });
    const jobs = await t.services
      .sql`select data from pgboss.job where name = 'avatar-loop' and data->>'avatarId' = ${a.id}`;
    expect(jobs.length).toBe(1);
    expect(jobs[0]!.data).toMatchObject({ avatarId: a.id, tenantId, reason: 'create', motionPrompt: 'calm, smiling' });
  });

  it('error: 422 naming sourceAssetId for a missing, foreign, non-image or unready asset; nothing written', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const other = await t.newTenant();
    const cases = [
      'ast_doesnotexist',
      await portraitAsset(t, other.tenantId),
      await portraitAsset(t, tenantId, { kind: 'audio' }),
      await portraitAsset(t, tenantId, { status: 'pending_upload' }),
    ];
    for (const sourceAssetId of cases) {
      const r = await call(t, apiKey, 'POST', A, { displayName: 'x', sourceAssetId });
      expect(r.status, sourceAssetId).toBe(422);
      expect(r.body).toMatchObject({ code: 'validation_error', field: 'sourceAssetId' });
    }
    expect((await call(t, apiKey, 'GET', A)).body).toEqual({ data: [] });
  });

  it('error: strict body: unknown, mis-cased, invalid or missing fields are 422 naming the field; over 128 KiB is 413', async () => {
    const { apiKey } = await t.newTenant();
    const cases: [unknown, string][] = [
      [{}, 'displayName'],
      [{ displayName: '' }, 'displayName'],
      [{ displayName: 'x'.repeat(161) }, 'displayName'],
      [{ displayName: 'x', DisplayName: 'y' }, 'DisplayName'],
      [{ displayName: 'x', sourceKind: 'video' }, 'sourceKind'],
      [{ displayName: 'x', metadata: [] }, 'metadata'],
      [{ displayName: 'x', personality: 'p' }, 'personality'],
      [{ displayName: 'x', portraitUrl: 'https://example.com/a.jpg' }, 'portraitUrl'],
    ];
    for (const [body, field] of cases) {
      const r = await call(t, apiKey, 'POST', A, body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(r.body.field, JSON.stringify(body)).toBe(field);
    }
    const deep = { displayName: 'x', metadata: JSON.parse(`${'{"a":'.repeat(40)}1${'}'.repeat(40)}`) as object };
    expect((await call(t, apiKey, 'POST', A, deep)).status).toBe(422);
    const big = await call(t, apiKey, 'POST', A, { displayName: 'x', metadata: { blob: 'x'.repeat(130 * 1024) } });
    expect(big.status).toBe(413);
    // Within the cap, but the merged instructions are over 16,000.
    const merged = await call(t, apiKey, 'POST', A, { displayName: 'x', metadata: { blob: 'x'.repeat(16_000) } });
    expect(merged.status).toBe(422);
    expect((await call(t, apiKey, 'GET', A)).body).toEqual({ data: [] });
  });

  it('error: a motion prompt the screen refuses is 422 loop_prompt_rejected', async () => {
    const { apiKey } = await t.newTenant();
    for (const motionPrompt of ['   ', 'x'.repeat(1201), 'slowly undress']) {
      const r = await call(t, apiKey, 'POST', A, { displayName: 'x', motionPrompt });
      expect(r.status, motionPrompt).toBe(422);
      expect(r.body.code).toBe('loop_prompt_rejected');
    }
  });

  it('security: avatars:read cannot create; the default key scopes read', async () => {
    const { apiKey } = await t.newTenant({ scopes: ['avatars:read'] });
    expect((await call(t, apiKey, 'POST', A, { displayName: 'x' })).status).toBe(403);
    expect((await call(t, apiKey, 'GET', A)).status).toBe(200);
  });
});

describe('GET /avatars', () => {
  it('happy: most recently updated first, deleted ones excluded, at most 100', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const a = await draft(apiKey, { displayName: 'first' });
    const b = await draft(apiKey, { displayName: 'second' });
    const c = await draft(apiKey, { displayName: 'third' });
    expect((await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { displayName: 'first, renamed' })).status).toBe(200);
    expect((await call(t, apiKey, 'DELETE', `${A}/${b.id}`)).status).toBe(204);
    const list = await call(t, apiKey, 'GET', A);
    expect((list.body as unknown as { data: { id: string }[] }).data.map((x) => x.id)).toEqual([a.id, c.id]);
    await t.services.sql`
      insert into avatars (id, tenant_id, display_name, status)
      select 'ava_bulk' || g, ${tenantId}, 'bulk', 'draft' from generate_series(1, 120) g`;
    const capped = (await call(t, apiKey, 'GET', A)).body as unknown as { data: unknown[] };
    expect(capped.data.length).toBe(100);
  });
});

describe('PATCH /avatars/{avatarId}', () => {
  it('happy: partial update of profile fields; the response and a later GET agree', async () => {
    const { apiKey } = await t.newTenant();
    const a = await draft(apiKey);
    const patch = {
      personality: 'Warm, curious.',
      background: 'A mathematician.',
      artDirection: 'soft light',
      replyStyle: 'Short answers.',
      metadata: { tone: 'kind' },
    };
    const r = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, patch);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ...patch, displayName: 'Ada', status: 'draft' });
    expect(Date.parse(r.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(a.updatedAt));
    expect((await call(t, apiKey, 'GET', `${A}/${a.id}`)).body).toEqual(r.body);
    const cleared = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { personality: null });
    expect(cleared.body).toMatchObject({ personality: null, background: 'A mathematician.' });
  });

  it('error: profile limits are in UTF-16 code units (an emoji counts 2)', async () => {
    const { apiKey } = await t.newTenant();
    const a = await draft(apiKey);
    const limits = {
      displayName: 160,
      personality: 4_000,
      background: 8_000,
      artDirection: 2_500,
      replyStyle: 1_000,
    } as const;
    for (const [field, max] of Object.entries(limits)) {
      // max/2 emoji = max code units: accepted; one more code unit: refused.
      const atMax = '😀'.repeat(max / 2);
      expect(atMax.length).toBe(max);
      const ok = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { [field]: atMax });
      expect(ok.status, `${field} at ${max}`).toBe(200);
      const over = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { [field]: `${atMax}a` });
      expect(over.status, `${field} at ${max + 1}`).toBe(422);
      expect(over.body.field).toBe(field);
      // Half the emoji count in characters is over the limit only when counted as code units.
      const overByEmoji = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { [field]: '😀'.repeat(max / 2 + 1) });
      expect(overByEmoji.status, `${field} emoji`).toBe(422);
      await call(
        t,
        apiKey,
        'PATCH',
        `${A}/${a.id}`,
        field === 'displayName' ? { displayName: 'Ada' } : { [field]: null },
      );
    }
  });

  it('error: merged session instructions over 16,000 characters are 422 before anything is saved', async () => {
    const { apiKey } = await t.newTenant();
    const a = await draft(apiKey);
    // Each field within its own limit, together over 16,000 once merged.
    const r1 = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, {
      personality: 'p'.repeat(4_000),
      background: 'b'.repeat(8_000),
      replyStyle: 'r'.repeat(1_000),
    });
    expect(r1.status).toBe(200);
    const before = (await call(t, apiKey, 'GET', `${A}/${a.id}`)).body;
    const room =
      16_000 -
      sessionInstructions({
        displayName: 'Ada',
        personality: 'p'.repeat(4_000),
        background: 'b'.repeat(8_000),
        replyStyle: 'r'.repeat(1_000),
      }).length;
    const over = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, {
      metadata: { notes: 'n'.repeat(room) },
      displayName: 'Ada L',
    });
    expect(over.status).toBe(422);
    expect(over.body.code).toBe('validation_error');
    expect((await call(t, apiKey, 'GET', `${A}/${a.id}`)).body).toEqual(before);
    // Exactly at the limit is accepted.
    const exact = sessionInstructions({
      displayName: 'Ada',
      personality: 'p'.repeat(4_000),
      background: 'b'.repeat(8_000),
      replyStyle: 'r'.repeat(1_000),
      metadata: { n: '' },
    }).length;
    const fits = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { metadata: { n: 'n'.repeat(16_000 - exact) } });
    expect(fits.status).toBe(200);
  });

  it('error: portraitUrl is always 400 portrait_url_not_supported, alone or with other fields', async () => {
    const { apiKey } = await t.newTenant();
    const a = await draft(apiKey);
    for (const body of [
      { portraitUrl: 'https://example.com/p.jpg' },
      { portraitUrl: null },
      { portraitUrl: 'x', displayName: 'y' },
    ]) {
      const r = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.code).toBe('portrait_url_not_supported');
    }
    expect((await call(t, apiKey, 'GET', `${A}/${a.id}`)).body.displayName).toBe('Ada');
  });

  it('error: an empty body, unknown fields and invalid values are 422', async () => {
    const { apiKey } = await t.newTenant();
    const a = await draft(apiKey);
    for (const body of [
      {},
      { Personality: 'x' },
      { anchorTimeMs: -1, sourceAssetId: 'ast_x' },
      { sourceReview: { reason: 'no' }, sourceAssetId: 'ast_x' },
    ]) {
      expect((await call(t, apiKey, 'PATCH', `${A}/${a.id}`, body)).status, JSON.stringify(body)).toBe(422);
    }
  });

  it('error: the swap lane is exclusive of every other field but anchorTimeMs and sourceReview', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const a = await draft(apiKey);
    const asset = await portraitAsset(t, tenantId);
    const mixed = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { sourceAssetId: asset, displayName: 'x' });
    expect(mixed.status).toBe(422);
    expect(mixed.body.field).toBe('displayName');
    for (const body of [
      { anchorTimeMs: 0 },
      { sourceReview: { reason: 'looked at it' } },
      { anchorTimeMs: 0, personality: 'x' },
    ]) {
      const r = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, body);
      expect(r.status, JSON.stringify(body)).toBe(422);
    }
    expect(
      (await t.services.sql`select count(*)::int as n from avatar_source_reviews where avatar_id = ${a.id}`)[0]!.n,
    ).toBe(0);
  });

  it('happy: a swap runs the source checks, records the verdict and re-queues generation', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const a = await draft(apiKey);
    const asset = await portraitAsset(t, tenantId, { fixture: 'astronaut' });
    const r = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { sourceAssetId: asset, anchorTimeMs: 0 });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ sourceAssetId: asset, status: 'preprocessing', idleVideoStatus: 'queued' });
    const [review] = await t.services.sql`select * from avatar_source_reviews where avatar_id = ${a.id}`;
    expect(review).toMatchObject({ asset_id: asset, accepted: true, review_reason: null });
    expect(review!.machine_verdict).toMatchObject({ passed: true, code: 'ok' });
    const jobs = await t.services
      .sql`select data from pgboss.job where name = 'avatar-loop' and data->>'avatarId' = ${a.id}`;
    expect(jobs.map((j) => (j.data as { reason: string }).reason)).toEqual(['swap']);
    // A second swap while that generation is in flight is a state conflict.
    const again = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { sourceAssetId: asset });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('avatar_state_conflict');
  });

  it('error: a failing source check refuses the swap (422), recorded; sourceReview lets it pass and the machine verdict is still recorded', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const a = await draft(apiKey);
    const wall = await portraitAsset(t, tenantId, { fixture: 'brick' });
    const refused = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { sourceAssetId: wall });
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({ code: 'validation_error', field: 'sourceAssetId' });
    expect((await call(t, apiKey, 'GET', `${A}/${a.id}`)).body).toMatchObject({
      sourceAssetId: null,
      status: 'draft',
      idleVideoStatus: 'none',
    });

    const profile = await portraitAsset(t, tenantId, { fixture: 'cameraman' });
    const reviewed = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, {
      sourceAssetId: profile,
      anchorTimeMs: 0,
      sourceReview: { reason: 'Checked by Ada: near profile is intended' },
    });
    expect(reviewed.status, JSON.stringify(reviewed.body)).toBe(200);
    expect(reviewed.body).toMatchObject({
      sourceAssetId: profile,
      status: 'preprocessing',
      idleVideoStatus: 'queued',
      anchorTimeMs: 0,
    });
    const rows = await t.services
      .sql`select asset_id, accepted, review_reason, machine_verdict from avatar_source_reviews where avatar_id = ${a.id} order by id`;
    expect(rows.map((r) => [r.asset_id, r.accepted, r.review_reason])).toEqual([
      [wall, false, null],
      [profile, true, 'Checked by Ada: near profile is intended'],
    ]);
    expect(rows[0]!.machine_verdict).toMatchObject({ passed: false, code: 'no_face' });
    // A face in near profile: too small or too turned for the rig's default limits.
    expect(rows[1]!.machine_verdict).toMatchObject({
      passed: false,
      code: expect.stringMatching(/^(face_too_small|extreme_pose)$/),
    });
    const [job] = await t.services
      .sql`select data from pgboss.job where name = 'avatar-loop' and data->>'avatarId' = ${a.id}`;
    expect(job!.data).toMatchObject({ reason: 'swap', reviewed: true });
  });
});

describe('settings.greeting and settings.language', () => {
  it('happy: a greeting and a language are stored with the rest of settings, on POST and PATCH, and read back', async () => {
    const { apiKey } = await t.newTenant();
    const greeting = 'Hello! I am Ada. What shall we talk about today? 😀';
    const a = await draft(apiKey, { settings: { greeting, language: 'en', theme: { dark: true } } });
    expect(a.settings).toEqual({ greeting, language: 'en', theme: { dark: true } });
    const atMax = '😀'.repeat(250);
    const r = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { settings: { greeting: atMax } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.settings).toEqual({ greeting: atMax });
    expect((await call(t, apiKey, 'GET', `${A}/${a.id}`)).body.settings).toEqual({ greeting: atMax });
  });

  it('error: a greeting over 500 UTF-16 code units, empty or not a string is 422 naming settings.greeting; nothing written', async () => {
    const { apiKey } = await t.newTenant();
    const a = await draft(apiKey, { settings: { greeting: 'Hi.' } });
    for (const greeting of [`${'😀'.repeat(250)}a`, 'a'.repeat(501), '   ', 42, null]) {
      const r = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { settings: { greeting } });
      expect(r.status, JSON.stringify(greeting)).toBe(422);
      expect(r.body).toMatchObject({ code: 'validation_error', field: 'settings.greeting' });
      const c = await call(t, apiKey, 'POST', A, { displayName: 'B', settings: { greeting } });
      expect(c.status, JSON.stringify(greeting)).toBe(422);
      expect(c.body).toMatchObject({ code: 'validation_error', field: 'settings.greeting' });
    }
    expect((await call(t, apiKey, 'GET', `${A}/${a.id}`)).body.settings).toEqual({ greeting: 'Hi.' });
    expect(((await call(t, apiKey, 'GET', A)).body as unknown as { data: unknown[] }).data).toHaveLength(1);
  });

  it('error: a language that is not an ISO 639-1 code is 422 naming settings.language; nothing written', async () => {
    const { apiKey } = await t.newTenant();
    const a = await draft(apiKey);
    for (const language of ['english', 'EN', 'en-US', 'eng', 'zz', '', 7]) {
      const r = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { settings: { language } });
      expect(r.status, JSON.stringify(language)).toBe(422);
      expect(r.body).toMatchObject({ code: 'validation_error', field: 'settings.language' });
    }
    expect((await call(t, apiKey, 'GET', `${A}/${a.id}`)).body.settings).toEqual({});
  });

  it('error: a language other than English without an OpenAI-compatible TTS is 422 naming settings.language, on POST and PATCH; nothing written', async () => {
    const { apiKey } = await t.newTenant();
    const a = await draft(apiKey, { settings: { language: 'en' } });
    const r = await call(t, apiKey, 'PATCH', `${A}/${a.id}`, { settings: { language: 'fr' }, personality: 'Chatty.' });
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ code: 'validation_error', field: 'settings.language' });
    expect(r.body.error).toMatch(/English only.*TTS_MODEL/);
    const after = (await call(t, apiKey, 'GET', `${A}/${a.id}`)).body;
    expect(after).toMatchObject({ settings: { language: 'en' }, personality: null });
    const c = await call(t, apiKey, 'POST', A, { displayName: 'B', settings: { language: 'de' } });
    expect(c.status).toBe(422);
    expect(c.body).toMatchObject({ code: 'validation_error', field: 'settings.language' });
    expect(((await call(t, apiKey, 'GET', A)).body as unknown as { data: unknown[] }).data).toHaveLength(1);
  });

  it('happy: with an OpenAI-compatible TTS configured, a French avatar is accepted and its session instructions say to answer in French', async () => {
    const withTts = await testApi({ env: { TTS_MODEL: 'tts-1' } });
    try {
      const { apiKey, tenantId } = await withTts.newTenant();
      const c = await call(withTts, apiKey, 'POST', A, { displayName: 'Amélie', settings: { language: 'fr' } });
      expect(c.status, JSON.stringify(c.body)).toBe(201);
      expect(c.body.settings).toEqual({ language: 'fr' });
      const r = await call(withTts, apiKey, 'PATCH', `${A}/${c.body.id}`, { settings: { language: 'ja' } });
      expect(r.status).toBe(200);
      const playback = await loadAvatarPlayback(withTts.services.sql, tenantId, c.body.id);
      expect(playback!.live).toEqual({ greeting: null, language: 'ja' });
      expect(playback!.instructions).toContain('Always answer in Japanese.');
    } finally {
      await withTts.close();
    }
  });
});

describe('DELETE /avatars/{avatarId}', () => {
  it('happy: soft delete answers 204, then 404 on every read and write', async () => {
    const { apiKey } = await t.newTenant({ credits: 100 });
    const a = await draft(apiKey);
    const del = await call(t, apiKey, 'DELETE', `${A}/${a.id}`);
    expect(del.status).toBe(204);
    expect(del.body).toBeNull();
    for (const [method, url, body] of [
      ['GET', `${A}/${a.id}`, undefined],
      ['PATCH', `${A}/${a.id}`, { displayName: 'x' }],
      ['PUT', `${A}/${a.id}/loop`, { motionPrompt: 'nod' }],
      ['DELETE', `${A}/${a.id}`, undefined],
    ] as const) {
      const r = await call(t, apiKey, method, url, body);
      expect(r.status, `${method} ${url}`).toBe(404);
      expect(r.body.code).toBe('not_found');
    }
    const [row] = await t.services.sql`select status, deleted_at from avatars where id = ${a.id}`;
    expect(row!.status).toBe('deleted');
    expect(row!.deleted_at).not.toBeNull();
  });
});

describe('isolation', () => {
  it("security: another tenant's avatar ids are 404 on every avatar route, and nothing changes", async () => {
    const owner = await t.newTenant({ credits: 100 });
    const a = await draft(owner.apiKey, { displayName: 'private' });
    const intruder = await t.newTenant({ credits: 100 });
    const routes = [
      ['GET', `${A}/${a.id}`, undefined],
      ['PATCH', `${A}/${a.id}`, { displayName: 'pwned' }],
      ['PATCH', `${A}/${a.id}`, { portraitUrl: 'x' }],
      ['PUT', `${A}/${a.id}/loop`, { motionPrompt: 'nod' }],
      ['DELETE', `${A}/${a.id}`, undefined],
    ] as const;
    for (const [method, url, body] of routes) {
      const r = await call(t, intruder.apiKey, method, url, body);
      expect(r.status, `${method} ${url}`).toBe(404);
      expect(r.body.error).not.toContain('private');
    }
    expect((await call(t, intruder.apiKey, 'GET', A)).body).toEqual({ data: [] });
    expect((await call(t, owner.apiKey, 'GET', `${A}/${a.id}`)).body).toMatchObject({
      displayName: 'private',
      status: 'draft',
    });
  });

  it('security: ids of any shape that name no avatar are 404, never 422 or 5xx', async () => {
    const { apiKey } = await t.newTenant();
    for (const id of [
      'ava_',
      'ava_nope',
      'nope',
      'AVA_x',
      `ava_${'x'.repeat(500)}`,
      '%27%20or%201%3D1',
      'ava_%F0%9F%98%80',
    ]) {
      for (const [method, url, body] of [
        ['GET', `${A}/${id}`, undefined],
        ['PATCH', `${A}/${id}`, { displayName: 'x' }],
        ['DELETE', `${A}/${id}`, undefined],
        ['PUT', `${A}/${id}/loop`, { motionPrompt: 'nod' }],
      ] as const) {
        expect((await call(t, apiKey, method, url, body)).status, `${method} ${id}`).toBe(404);
      }
    }
  });
});
