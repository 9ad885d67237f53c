import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { DashboardRole } from '../../core/dashboard/auth.ts';
import { testApi } from '../../test/helpers.ts';
import { runJanitorOnce } from '../janitor.ts';

/** Everything the API logs (debug and up), and every secret the tests saw: none may be in the log. */
let logged = '';
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    logged += chunk.toString('utf8');
    done();
  },
});
const secrets = new Set<string>();
const api = await testApi({ log: pino({ level: 'debug' }, sink) });
afterAll(() => api.close());
const ORIGIN = new URL(api.services.config.publicBaseUrl).origin;

/** A request to the in-process app, as a browser page of the dashboard sends it (same origin). */
function send(
  method: string,
  path: string,
  o: { cookie?: string; csrf?: string; origin?: string; body?: unknown; key?: string } = {},
) {
  const headers: Record<string, string> = { origin: o.origin ?? ORIGIN };
  if (o.cookie) headers.cookie = o.cookie;
  if (o.csrf) headers['x-dashboard-csrf'] = o.csrf;
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  return api.app.request(path, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body) });
}

/** Signs in with a fresh link: the cookie to send back and the session's anti-forgery token. */
async function signIn(role: DashboardRole, tenantId?: string) {
  const tenant = tenantId ? { tenantId } : await api.newTenant({ credits: 100 });
  const { token } = await api.services.dashboard.createLink({
    tenantId: tenant.tenantId,
    email: `${role}@example.com`,
    role,
  });
  const res = await send('POST', '/platform/api/signin', { csrf: 'signin', body: { token } });
  expect(res.status).toBe(200);
  const setCookie = res.headers.get('set-cookie')!;
  const session = (await res.json()) as { csrfToken: string; role: string; canManageKeys: boolean };
  for (const secret of [token, setCookie.split(';')[0]!.split('=')[1]!, session.csrfToken]) secrets.add(secret);
  return { ...tenant, token, setCookie, cookie: setCookie.split(';')[0]!, csrf: session.csrfToken, session };
}

describe('dashboard sign-in', () => {
  it('happy: a link signs in once, with an HttpOnly, SameSite=Strict, expiring cookie; a second use is refused', async () => {
    const s = await signIn('owner');
    expect(s.setCookie).toMatch(/^avatar_dashboard=[\w-]{43};/);
    expect(s.setCookie).toMatch(/HttpOnly/);
    expect(s.setCookie).toMatch(/SameSite=Strict/);
    expect(s.setCookie).toMatch(/Expires=/);
    expect(s.setCookie).toMatch(/Path=\//);
    // http://localhost: not Secure (a browser would drop a Secure cookie over plain http).
    expect(s.setCookie).not.toMatch(/Secure/);
    expect(s.session).toMatchObject({ role: 'owner', canManageKeys: true });

    const again = await send('POST', '/platform/api/signin', { csrf: 'signin', body: { token: s.token } });
    expect(again.status).toBe(401);
    // Only hashes are stored: neither the link's token nor the cookie's value is in the database.
    const rows = await api.services.sql`select * from dashboard_sessions s, dashboard_sign_in_links l`;
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain(s.token);
    expect(dump).not.toContain(s.cookie.split('=')[1]);
  });

  it('error: an expired link is refused and signs no one in; the janitor drops it', async () => {
    const t = await api.newTenant();
    const { token } = await api.services.dashboard.createLink({
      tenantId: t.tenantId,
      email: 'a@example.com',
      role: 'owner',
    });
    await api.services.sql`update dashboard_sign_in_links set expires_at = now() - interval '1 second'`;
    const res = await send('POST', '/platform/api/signin', { csrf: 'signin', body: { token } });
    expect(res.status).toBe(401);
    expect(res.headers.get('set-cookie')).toBeNull();
    await runJanitorOnce(api.services);
    expect(await api.services.sql`select 1 from dashboard_sign_in_links where tenant_id = ${t.tenantId}`).toHaveLength(
      0,
    );
  });

  it('security: a sign-in from another origin, or without the anti-forgery header, is refused', async () => {
    const t = await api.newTenant();
    const { token } = await api.services.dashboard.createLink({
      tenantId: t.tenantId,
      email: 'a@example.com',
      role: 'owner',
    });
    expect(
      (await send('POST', '/platform/api/signin', { csrf: 'signin', origin: 'https://evil.example', body: { token } }))
        .status,
    ).toBe(403);
    expect((await send('POST', '/platform/api/signin', { body: { token } })).status).toBe(403);
    // Neither consumed the link.
    expect((await send('POST', '/platform/api/signin', { csrf: 'signin', body: { token } })).status).toBe(200);
  });
});

describe('dashboard session on /api/v1', () => {
  it('security: no cookie is 401; the cookie without its anti-forgery header, or from another origin, is 403', async () => {
    const s = await signIn('owner');
    expect((await send('GET', '/api/v1/credits/balance')).status).toBe(401);
    expect((await send('GET', '/platform/api/keys')).status).toBe(401);
    expect((await send('GET', '/api/v1/credits/balance', { cookie: s.cookie })).status).toBe(403);
    expect((await send('GET', '/api/v1/credits/balance', { cookie: s.cookie, csrf: 'guess' })).status).toBe(403);
    const cross = await send('GET', '/api/v1/credits/balance', {
      cookie: s.cookie,
      csrf: s.csrf,
      origin: 'https://evil.example',
    });
    expect(cross.status).toBe(403);
    const ok = await send('GET', '/api/v1/credits/balance', { cookie: s.cookie, csrf: s.csrf });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ tenantId: s.tenantId, availableCreditMicros: 100_000_000 });
  });

  it('security: a member uses the workspace but cannot manage keys (403)', async () => {
    const s = await signIn('member');
    expect(s.session.canManageKeys).toBe(false);
    const auth = { cookie: s.cookie, csrf: s.csrf };
    expect((await send('GET', '/api/v1/credits/balance', auth)).status).toBe(200);
    expect((await send('GET', '/api/v1/avatars', auth)).status).toBe(200);
    expect((await send('GET', '/platform/api/keys', auth)).status).toBe(403);
    const mint = await send('POST', '/api/v1/api-keys', { ...auth, body: { name: 'sneaky' } });
    expect(mint.status).toBe(403);
    expect((await api.services.keys.list(s.tenantId)).map((k) => k.name)).not.toContain('sneaky');
    const [key] = await api.services.keys.list(s.tenantId);
    expect((await send('POST', `/platform/api/keys/${key!.id}/copy`, auth)).status).toBe(403);
    expect((await send('POST', `/platform/api/keys/${key!.id}/revoke`, auth)).status).toBe(403);
  });

  it('security: signing out ends the session: its cookie is 401 and its key revoked', async () => {
    const s = await signIn('admin');
    const auth = { cookie: s.cookie, csrf: s.csrf };
    expect((await send('POST', '/platform/api/signout', auth)).status).toBe(204);
    expect((await send('GET', '/api/v1/credits/balance', auth)).status).toBe(401);
    const sessionKeys = (await api.services.keys.list(s.tenantId)).filter((k) =>
      k.name.startsWith('dashboard session'),
    );
    expect(sessionKeys.map((k) => k.status)).toEqual(['revoked']);
  });
});

describe('dashboard keys', () => {
  it('happy: a key made in the dashboard is listed masked and copied again; it works as a bearer key', async () => {
    const s = await signIn('owner');
    const auth = { cookie: s.cookie, csrf: s.csrf };
    const res = await send('POST', '/api/v1/api-keys', {
      ...auth,
      body: { name: 'backend', scopes: ['credits:read'], spendLimitCreditMicros: 5_000_000 },
    });
    expect(res.status).toBe(201);
    const created = (await res.json()) as { id: string; apiKey: string };
    secrets.add(created.apiKey);

    const list = (await (await send('GET', '/platform/api/keys', auth)).json()) as { data: Record<string, unknown>[] };
    const row = list.data.find((k) => k.id === created.id)!;
    expect(row).toMatchObject({ name: 'backend', copyable: true, spendLimitCreditMicros: 5_000_000 });
    expect(JSON.stringify(list)).not.toContain(created.apiKey.slice(-20));
    // The sessions' own keys are not listed.
    expect(list.data.map((k) => k.name)).not.toContain('dashboard session: owner@example.com');

    const copy = await send('POST', `/platform/api/keys/${created.id}/copy`, auth);
    expect(await copy.json()).toEqual({ apiKey: created.apiKey });
    expect((await send('GET', '/api/v1/credits/balance', { key: created.apiKey })).status).toBe(200);
    // A root key of the workspace: it outlives the session that made it.
    expect((await api.services.keys.list(s.tenantId)).find((k) => k.id === created.id)!.parentId).toBeNull();

    // Kept encrypted: the stored bytes hold no part of the secret.
    const [kept] = await api.services.sql<{ ciphertext: Buffer }[]>`
      select ciphertext from dashboard_key_secrets where api_key_id = ${created.id}`;
    expect(kept!.ciphertext.toString('latin1')).not.toContain(created.apiKey.slice(-20));
  });

  it('error: a hash-only key, a revoked key and an expired key cannot be copied (409, saying why)', async () => {
    const s = await signIn('admin');
    const auth = { cookie: s.cookie, csrf: s.csrf };
    const [hashOnly] = (await api.services.keys.list(s.tenantId)).filter((k) => k.name === 'test');
    const list = (await (await send('GET', '/platform/api/keys', auth)).json()) as { data: Record<string, unknown>[] };
    expect(list.data.find((k) => k.id === hashOnly!.id)).toMatchObject({ copyable: false });
    const res = await send('POST', `/platform/api/keys/${hashOnly!.id}/copy`, auth);
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ code: 'key_not_copyable', error: expect.stringMatching(/only its hash/) });

    const made = (await (await send('POST', '/api/v1/api-keys', { ...auth, body: { name: 'x' } })).json()) as {
      id: string;
    };
    await api.services.sql`update api_keys set expires_at = now() - interval '1 second' where id = ${made.id}`;
    expect((await send('POST', `/platform/api/keys/${made.id}/copy`, auth)).status).toBe(409);

    const other = (await (await send('POST', '/api/v1/api-keys', { ...auth, body: { name: 'y' } })).json()) as {
      id: string;
    };
    expect((await send('POST', `/platform/api/keys/${other.id}/revoke`, auth)).status).toBe(200);
    expect((await send('POST', `/platform/api/keys/${other.id}/copy`, auth)).status).toBe(409);
  });

  it("security: another workspace's key is not found, to copy or to revoke", async () => {
    const a = await signIn('owner');
    const b = await api.newTenant();
    const auth = { cookie: a.cookie, csrf: a.csrf };
    expect((await send('POST', `/platform/api/keys/${b.apiKeyId}/copy`, auth)).status).toBe(404);
    expect((await send('POST', `/platform/api/keys/${b.apiKeyId}/revoke`, auth)).status).toBe(404);
    expect((await api.services.keys.list(b.tenantId))[0]!.status).toBe('active');
  });

  it("error: bad input to a key is the API's 422 naming the field", async () => {
    const s = await signIn('owner');
    const res = await send('POST', '/api/v1/api-keys', {
      cookie: s.cookie,
      csrf: s.csrf,
      body: { name: 'late', expiresAt: '2001-01-01T00:00:00Z' },
    });
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ field: 'expiresAt' });
  });
});

describe('dashboard pages', () => {
  it("happy: the pages are one shell with a strict Content-Security-Policy; its bundle is cached for good, the call's code apart", async () => {
    for (const path of [
      '/platform/dashboard',
      '/platform/billing',
      '/platform/signin',
      '/platform/dashboard/avatars/ava_x',
    ]) {
      const res = await api.app.request(path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-security-policy')).toMatch(/script-src 'self'; style-src 'self'/);
      expect(res.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/);
      expect(res.headers.get('cache-control')).toBe('no-cache');
    }
    const html = await (await api.app.request('/platform/dashboard')).text();
    const script = /src="(\/platform\/assets\/main-[A-Z0-9]{8}\.js)"/.exec(html)![1]!;
    const js = await api.app.request(script);
    expect(js.headers.get('content-type')).toMatch(/javascript/);
    expect(js.headers.get('cache-control')).toMatch(/immutable/);
    expect((await api.app.request('/platform/assets/main-00000000.js')).status).toBe(404);
    // The pages load without the call's code (livekit-client): the playground imports it when it opens.
    const main = await js.text();
    expect(main).not.toContain('RTCPeerConnection');
    const chunks = [...main.matchAll(/import\("\.\/(chunk-[A-Z0-9]{8}\.js)"\)/g)].map((m) => m[1]!);
    expect(chunks.length).toBeGreaterThan(0);
    const loaded = await Promise.all(chunks.map(async (c) => (await api.app.request(`/platform/assets/${c}`)).text()));
    expect(loaded.some((code) => code.includes('RTCPeerConnection'))).toBe(true);
  });
});

describe('dashboard logs', () => {
  // Last in the file: after every sign-in, key creation and copy above.
  it('security: no link token, session cookie, anti-forgery token or key reaches the log', () => {
    expect(logged).toContain('dashboard signed in');
    expect(logged).toContain('dashboard key copied');
    expect(secrets.size).toBeGreaterThan(10);
    for (const secret of secrets) expect(logged).not.toContain(secret);
    expect(logged).not.toMatch(/svc_[0-9A-Za-z]{16}_[0-9A-Za-z]{43}/);
  });
});
