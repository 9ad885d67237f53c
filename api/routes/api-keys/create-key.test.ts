import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { sha256 } from '../../../core/auth/keys.ts';
import { json, testApi, waitFor } from '../../../test/helpers.ts';

const logLines: string[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, cb) {
    logLines.push(chunk.toString());
    cb();
  },
});
const t = await testApi({ log: pino({ level: 'trace' }, sink) });
afterAll(() => t.close());
const URL = '/api/v1/api-keys';

interface Created {
  id: string;
  keyId: string;
  apiKey: string;
  redactedKey: string;
  scopes: string[];
  status: string;
  environment: string;
  spendLimitCreditMicros: number | null;
  expiresAt: string | null;
  tenantId: string;
  name: string;
}

async function create(key: string, body: unknown) {
  const res = await t.request('POST', URL, { key, body });
  return { res, body: await json<Created & { code?: string; field?: string }>(res) };
}

describe('POST /api-keys', () => {
  it('happy: mints a svc_<keyId>_<secret> key with the default scopes that then authenticates', async () => {
    const admin = await t.newTenant({ credits: 1 });
    const { res, body } = await create(admin.apiKey, { name: 'backend' });
    expect(res.status).toBe(201);
    expect(body.apiKey).toMatch(new RegExp(`^svc_${body.keyId}_[0-9A-Za-z]{43}$`));
    expect(body.id).toBe(`svc_${body.keyId}`);
    expect(body.scopes).toEqual(['realtime:write', 'credits:read', 'avatars:read']);
    expect(body).toMatchObject({
      status: 'active',
      tenantId: admin.tenantId,
      spendLimitCreditMicros: null,
      expiresAt: null,
    });
    expect(body.redactedKey).not.toContain(body.apiKey.split('_')[2]);
    const balance = await t.request('GET', '/api/v1/credits/balance', { key: body.apiKey });
    expect(balance.status).toBe(200);
    // The default key starts calls and reads, but writes no keys (nor avatars).
    expect((await create(body.apiKey, { name: 'x' })).res.status).toBe(403);
  });

  it('happy: accepts and ignores the deprecated environment, keeps scopes, limit and expiry', async () => {
    const admin = await t.newTenant();
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const { res, body } = await create(admin.apiKey, {
      name: 'limited',
      environment: 'test',
      scopes: ['usage:read', 'credits:read'],
      spendLimitCreditMicros: 5_000_000,
      expiresAt,
    });
    expect(res.status).toBe(201);
    expect(body).toMatchObject({
      environment: 'live',
      scopes: ['usage:read', 'credits:read'],
      spendLimitCreditMicros: 5_000_000,
    });
    expect(Date.parse(body.expiresAt!)).toBe(Date.parse(expiresAt));
  });

  it('error: 422 naming the field for unknown, mis-cased, invalid or missing fields; nothing written', async () => {
    const admin = await t.newTenant();
    const cases: [unknown, string][] = [
      [{ name: 'x', Scopes: ['*'] }, 'Scopes'],
      [{ name: 'x', scopes: ['avatars:delete'] }, 'scopes[0]'],
      [{ name: 'x', scopes: [] }, 'scopes'],
      [{ name: 'x', scopes: ['credits:read', 'credits:read'] }, 'scopes'],
      [{ name: '' }, 'name'],
      [{}, 'name'],
      [{ name: 'x', spendLimitCreditMicros: -1 }, 'spendLimitCreditMicros'],
      [{ name: 'x', spendLimitCreditMicros: 1.5 }, 'spendLimitCreditMicros'],
      [{ name: 'x', expiresAt: 'tomorrow' }, 'expiresAt'],
      [{ name: 'x', expiresAt: new Date(Date.now() - 1000).toISOString() }, 'expiresAt'],
    ];
    const before = (await t.services.keys.list(admin.tenantId)).length;
    for (const [payload, field] of cases) {
      const { res, body } = await create(admin.apiKey, payload);
      expect(res.status, JSON.stringify(payload)).toBe(422);
      expect(body.field, JSON.stringify(payload)).toBe(field);
      expect(body.code).toBe('validation_error');
    }
    expect((await t.services.keys.list(admin.tenantId)).length).toBe(before);
  });

  it('error: malformed JSON is 400, a non-JSON content type 415, an oversized body 413', async () => {
    const admin = await t.newTenant();
    const headers = { 'content-type': 'application/json' };
    expect((await t.request('POST', URL, { key: admin.apiKey, rawBody: '{"name":', headers })).status).toBe(400);
    const form = await t.request('POST', URL, {
      key: admin.apiKey,
      rawBody: 'name=x',
      headers: { 'content-type': 'text/plain' },
    });
    expect(form.status).toBe(415);
    const big = JSON.stringify({ name: 'x'.repeat(40_000) });
    const res = await t.request('POST', URL, { key: admin.apiKey, rawBody: big, headers });
    expect(res.status).toBe(413);
    expect(await json(res)).toMatchObject({ code: 'payload_too_large', status: 413 });
  });

  it('security: a key cannot grant scopes it lacks, nor escape its own spend limit', async () => {
    const admin = await t.newTenant();
    const writer = await create(admin.apiKey, { name: 'writer', scopes: ['api_keys:write', 'credits:read'] });
    const escalate = await create(writer.body.apiKey, { name: 'x', scopes: ['avatars:write'] });
    expect(escalate.res.status).toBe(403);
    expect(escalate.body.field).toBe('scopes');
    expect((await create(writer.body.apiKey, { name: 'x', scopes: ['*'] })).res.status).toBe(403);
    expect((await create(writer.body.apiKey, { name: 'x', scopes: ['credits:read'] })).res.status).toBe(201);

    const limited = await create(admin.apiKey, { name: 'l', scopes: ['api_keys:write'], spendLimitCreditMicros: 1000 });
    expect((await create(limited.body.apiKey, { name: 'x', scopes: ['api_keys:write'] })).res.status).toBe(403);
    expect(
      (await create(limited.body.apiKey, { name: 'x', scopes: ['api_keys:write'], spendLimitCreditMicros: 2000 })).res
        .status,
    ).toBe(403);
    expect(
      (await create(limited.body.apiKey, { name: 'x', scopes: ['api_keys:write'], spendLimitCreditMicros: 500 })).res
        .status,
    ).toBe(201);
  });

  it('security: the secret is stored only as its SHA-256 and never logged', async () => {
    const admin = await t.newTenant();
    const { body } = await create(admin.apiKey, { name: 'audited' });
    const secret = body.apiKey.split('_')[2]!;
    const [row] = await t.services.sql<Record<string, unknown>[]>`select * from api_keys where id = ${body.id}`;
    expect(Buffer.from(row!.secret_hash as Uint8Array).equals(sha256(secret))).toBe(true);
    expect(JSON.stringify(row)).not.toContain(secret);
    await t.request('GET', '/api/v1/credits/balance', { key: `${body.apiKey}x` });
    await t.request('GET', '/api/v1/credits/balance', { key: body.apiKey });
    expect(logLines.join('\n')).not.toContain(secret);
    expect(logLines.join('\n')).not.toContain(admin.apiKey.split('_')[2]!);
  });
});

describe('authentication', () => {
  const BALANCE = '/api/v1/credits/balance';

  it('401 for missing, malformed, unknown, wrong-secret, revoked and expired keys', async () => {
    const admin = await t.newTenant();
    const { body: k } = await create(admin.apiKey, { name: 'k' });
    const wrongSecret = `${k.apiKey.slice(0, -1)}${k.apiKey.endsWith('A') ? 'B' : 'A'}`;
    for (const header of [
      undefined,
      'Basic abc',
      'Bearer',
      `Bearer ${k.keyId}`,
      'Bearer svc_',
      `Bearer svc_${'A'.repeat(16)}_${'b'.repeat(43)}`,
      `Bearer ${wrongSecret}`,
    ]) {
      const res = await t.request('GET', BALANCE, { headers: header ? { authorization: header } : {} });
      expect(res.status, String(header)).toBe(401);
      expect((await json(res)).code).toBe('unauthorized');
    }
    await t.services.keys.revoke(k.id);
    expect((await t.request('GET', BALANCE, { key: k.apiKey })).status).toBe(401);

    const { record, apiKey } = await t.services.keys.create({
      tenantId: admin.tenantId,
      name: 'soon',
      scopes: ['*'],
      expiresAt: new Date(Date.now() + 300),
    });
    expect((await t.request('GET', BALANCE, { key: apiKey })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 400));
    const expired = await t.request('GET', BALANCE, { key: apiKey });
    expect(expired.status).toBe(401);
    expect((await json(expired)).error).toMatch(/expired/);
    expect(record.expiresAt).not.toBeNull();
  });

  it('revocation takes effect at once, even after the key was cached by a successful request', async () => {
    const admin = await t.newTenant();
    const { body: k } = await create(admin.apiKey, { name: 'k' });
    expect((await t.request('GET', BALANCE, { key: k.apiKey })).status).toBe(200);
    // Revoke through SQL, as another process (the admin CLI) would: the NOTIFY trigger drops the cache.
    await t.services.sql`update api_keys set status = 'revoked' where id = ${k.id}`;
    await waitFor('the revocation to reach the key cache', async () =>
      (await t.request('GET', BALANCE, { key: k.apiKey })).status === 401 ? true : undefined,
    );
  });

  it('legacy svc_live_ and svc_test_ keys authenticate', async () => {
    const admin = await t.newTenant();
    for (const env of ['live', 'test'] as const) {
      const { apiKey } = await t.services.keys.create({
        tenantId: admin.tenantId,
        name: env,
        scopes: ['credits:read'],
        legacyEnvironment: env,
      });
      expect(apiKey.startsWith(`svc_${env}_`)).toBe(true);
      expect((await t.request('GET', BALANCE, { key: apiKey })).status).toBe(200);
      // A different last character, whatever it was: the same key with one character wrong.
      const wrong = `${apiKey.slice(0, -1)}${apiKey.endsWith('0') ? '1' : '0'}`;
      expect((await t.request('GET', BALANCE, { key: wrong })).status).toBe(401);
    }
  });

  it('403 "Tenant is not active" for a suspended workspace, and back once reactivated', async () => {
    const admin = await t.newTenant();
    expect((await t.request('GET', BALANCE, { key: admin.apiKey })).status).toBe(200);
    await t.services.tenants.setStatus(admin.tenantId, 'suspended');
    await waitFor('the suspension to reach the key cache', async () =>
      (await t.request('GET', BALANCE, { key: admin.apiKey })).status === 403 ? true : undefined,
    );
    const body = await json(await t.request('GET', BALANCE, { key: admin.apiKey }));
    expect(body).toMatchObject({ error: 'Tenant is not active', code: 'tenant_not_active', status: 403 });
    await t.services.tenants.setStatus(admin.tenantId, 'active');
    await waitFor('the reactivation to reach the key cache', async () =>
      (await t.request('GET', BALANCE, { key: admin.apiKey })).status === 200 ? true : undefined,
    );
  });
});

describe('keys that mint keys (issue 25)', () => {
  const BALANCE = '/api/v1/credits/balance';
  const status = async (key: string) => (await t.request('GET', BALANCE, { key })).status;
  const inAnHour = () => new Date(Date.now() + 3_600_000);
  const writer = (admin: { apiKey: string }, extra: Record<string, unknown> = {}) =>
    create(admin.apiKey, { name: 'writer', scopes: ['api_keys:write', 'credits:read'], ...extra });

  it('security: a key minted by an expiring key expires no later than it: a later or absent expiresAt is 403 naming it', async () => {
    const admin = await t.newTenant();
    const until = inAnHour();
    const parent = await writer(admin, { expiresAt: until.toISOString() });
    expect(parent.res.status).toBe(201);
    const before = (await t.services.keys.list(admin.tenantId)).length;
    // The old behaviour: 201, and a key that outlived its parent.
    for (const expiresAt of [undefined, null, new Date(until.getTime() + 1000).toISOString()]) {
      const { res, body } = await create(parent.body.apiKey, { name: 'child', scopes: ['credits:read'], expiresAt });
      expect(res.status, String(expiresAt)).toBe(403);
      expect(body).toMatchObject({ code: 'forbidden', field: 'expiresAt' });
      expect((body as unknown as { error: string }).error).toContain(until.toISOString());
    }
    expect((await t.services.keys.list(admin.tenantId)).length).toBe(before);
    for (const expiresAt of [until, new Date(until.getTime() - 60_000)]) {
      const { res, body } = await create(parent.body.apiKey, {
        name: 'child',
        scopes: ['credits:read'],
        expiresAt: expiresAt.toISOString(),
      });
      expect(res.status).toBe(201);
      expect(Date.parse(body.expiresAt!)).toBe(expiresAt.getTime());
    }
    // A grandchild nests inside the chain too.
    const child = await create(parent.body.apiKey, {
      name: 'child',
      scopes: ['api_keys:write'],
      expiresAt: until.toISOString(),
    });
    expect((await create(child.body.apiKey, { name: 'grandchild', scopes: ['api_keys:write'] })).body.field).toBe(
      'expiresAt',
    );
  });

  it('security: a minted key stops working when the key above it expires, even if its own expiry says later', async () => {
    const admin = await t.newTenant();
    const parent = await writer(admin, { expiresAt: new Date(Date.now() + 3000).toISOString() });
    const child = await create(parent.body.apiKey, {
      name: 'child',
      scopes: ['credits:read'],
      expiresAt: parent.body.expiresAt,
    });
    expect(child.res.status).toBe(201);
    // Push the child's expiry out behind the mint's back (as a direct SQL edit would): the chain is
    // re-checked at verify, from the cache too (the first request below caches the child).
    await t.services.sql`update api_keys set expires_at = now() + interval '1 hour' where id = ${child.body.id}`;
    await waitFor('the edit to reach the key cache', async () =>
      (await status(child.body.apiKey)) === 200 ? true : undefined,
    );
    await waitFor('the parent to expire', async () => ((await status(parent.body.apiKey)) === 401 ? true : undefined));
    const res = await t.request('GET', BALANCE, { key: child.body.apiKey });
    expect(res.status).toBe(401);
    expect((await json(res)).error).toMatch(/minted under has expired/);
  });

  it('security: revoking a key revokes every key minted under it, at any depth, and nothing else', async () => {
    const admin = await t.newTenant();
    const a = await writer(admin, { scopes: ['api_keys:write', 'credits:read'] });
    const b = await create(a.body.apiKey, { name: 'b', scopes: ['api_keys:write', 'credits:read'] });
    const c = await create(b.body.apiKey, { name: 'c', scopes: ['credits:read'] });
    const sibling = await writer(admin);
    for (const k of [a, b, c, sibling]) expect(await status(k.body.apiKey)).toBe(200);

    const revoked = await t.services.keys.revoke(a.body.id);
    for (const k of [a, b, c]) expect(await status(k.body.apiKey), k.body.name).toBe(401);
    expect(await status(sibling.body.apiKey)).toBe(200);
    expect(await status(admin.apiKey)).toBe(200);
    expect(revoked).toMatchObject({ id: a.body.id, status: 'revoked', revokedDescendants: 2 });
    const rows = await t.services.sql<{ id: string; status: string; parent_id: string }[]>`
      select id, status, parent_id from api_keys where id = any(${[b.body.id, c.body.id]}) order by created_at`;
    expect(rows).toEqual([
      { id: b.body.id, status: 'revoked', parent_id: a.body.id },
      { id: c.body.id, status: 'revoked', parent_id: b.body.id },
    ]);
  });

  it('security: a key whose minter was revoked without the cascade (direct SQL) is refused all the same', async () => {
    const admin = await t.newTenant();
    const parent = await writer(admin);
    const child = await create(parent.body.apiKey, { name: 'child', scopes: ['credits:read'] });
    expect(await status(child.body.apiKey)).toBe(200);
    await t.services.sql`update api_keys set status = 'revoked' where id = ${parent.body.id}`;
    await waitFor('the revocation to reach the key cache', async () =>
      (await status(child.body.apiKey)) === 401 ? true : undefined,
    );
    expect((await json(await t.request('GET', BALANCE, { key: child.body.apiKey }))).error).toMatch(
      /minted under was revoked/,
    );
  });

  it('security: keys minted while their minter is being revoked are all revoked with it', async () => {
    const admin = await t.newTenant();
    const parent = await writer(admin);
    const mints = Array.from({ length: 8 }, (_, i) =>
      create(parent.body.apiKey, { name: `racer ${i}`, scopes: ['credits:read'] }),
    );
    await new Promise((r) => setTimeout(r, 5));
    await t.services.keys.revoke(parent.body.id);
    const results = await Promise.all(mints);
    for (const { res } of results) expect([201, 401]).toContain(res.status);
    for (const { res, body } of results) if (res.status === 201) expect(await status(body.apiKey)).toBe(401);
    const live = await t.services
      .sql`select id from api_keys where ${parent.body.id} = any(ancestor_ids) and status = 'active'`;
    expect(live).toEqual([]);
  });

  it('happy: a key minted by an unlimited, never-expiring key may itself be unlimited and never expire', async () => {
    const admin = await t.newTenant();
    const { res, body } = await create(admin.apiKey, { name: 'child', scopes: ['credits:read'] });
    expect(res.status).toBe(201);
    expect(body).toMatchObject({ spendLimitCreditMicros: null, expiresAt: null });
    const [row] = await t.services.sql<
      { parent_id: string; ancestor_ids: string[] }[]
    >`select parent_id, ancestor_ids from api_keys where id = ${body.id}`;
    expect(row).toEqual({ parent_id: admin.apiKeyId, ancestor_ids: [admin.apiKeyId] });
  });
});
