import { ConnectionState, Room } from '@livekit/rtc-node';
import { RoomServiceClient } from 'livekit-server-sdk';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sha256 } from '../../../core/auth/keys.ts';
import { LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET } from '../../../test/deps.ts';
import { json, testApi } from '../../../test/helpers.ts';
import { captureDispatches, liveKitEnv } from '../../../test/livekit.ts';
import { MINT, readyAvatar, RELEASE, setSlots, type GrantBody } from './test-support.ts';

const JOIN = '/api/v1/realtime/livekit/join';
const APP = 'https://app.example.com';
const env = liveKitEnv();
const t = await testApi({ env });
const rooms = new RoomServiceClient(inject('livekitUrl').replace(/^ws/, 'http'), LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET);
let agent: Awaited<ReturnType<typeof captureDispatches>>;

beforeAll(async () => {
  agent = await captureDispatches(env.AGENT_NAME!);
  await setSlots(t, 'primary', 50);
});
afterAll(async () => {
  await agent?.stop();
  await t.close();
});

/** A workspace with credits, a ready avatar, and `origins` allowed (none: no limit). */
async function workspace(origins: string[] = []) {
  const tenant = await t.newTenant({ credits: 100 });
  if (origins.length) {
    const res = await t.request('PATCH', '/api/v1/workspace', {
      key: tenant.apiKey,
      body: { allowedOrigins: origins },
    });
    expect(res.status).toBe(200);
  }
  return { ...tenant, avatarId: await readyAvatar(t, tenant.tenantId) };
}

async function mint(w: { apiKey: string; avatarId: string }, extra: Record<string, unknown> = {}): Promise<GrantBody> {
  const res = await t.request('POST', MINT, { key: w.apiKey, body: { avatar_id: w.avatarId, ...extra } });
  expect(res.status, await res.clone().text()).toBe(200);
  return json<GrantBody>(res);
}

async function join(joinToken: unknown, origin?: string) {
  const res = await t.request('POST', JOIN, {
    body: { join_token: joinToken },
    headers: origin === undefined ? {} : { origin },
  });
  return { status: res.status, body: await json(res), res };
}

const used = async (token: string) =>
  (
    await t.services.sql<
      { used_at: Date | null }[]
    >`select used_at from live_join_tokens where token_hash = ${sha256(token)}`
  )[0]?.used_at ?? null;

describe('POST /realtime/livekit/session with allowed origins', () => {
  it('happy: a workspace without allowed origins gets the grant as before: the LiveKit token, no join token', async () => {
    const g = await mint(await workspace());
    expect(g.participant_token).toEqual(expect.any(String));
    expect(g).not.toHaveProperty('join_token');
    expect(g).not.toHaveProperty('join_url');
  });

  it('security: with allowed origins the LiveKit token never leaves the API: participant_token null, a join token (kept only hashed) and the join URL', async () => {
    const w = await workspace([APP]);
    const g = await mint(w);
    expect(g.participant_token).toBeNull();
    expect(g.participant_identity).toBe(`user-${g.session_id}`);
    expect(g.join_token).toMatch(/^sjt_[A-Za-z0-9_-]{43}$/);
    expect(g.join_url).toBe(`${t.services.config.publicBaseUrl}${JOIN}`);
    const rows = await t.services.sql<{ token_hash: Buffer; session_id: string; expires_at: Date }[]>`
      select token_hash, session_id, expires_at from live_join_tokens where tenant_id = ${w.tenantId}`;
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash.equals(sha256(g.join_token!))).toBe(true);
    expect(rows[0]!.session_id).toBe(g.session_id);
    // It expires with the grant.
    expect(Math.abs(rows[0]!.expires_at.getTime() - Date.parse(g.expires_at))).toBeLessThan(5_000);
  });

  it('happy: provider mode is unchanged by allowed origins: no user token, no join token', async () => {
    const w = await workspace([APP]);
    const g = await mint(w, { room: { name: `provider-${w.tenantId}`, agent_identity: 'my-agent' } });
    expect(g.participant_token).toBeNull();
    expect(g).not.toHaveProperty('join_token');
  });

  it("happy: a dashboard page's mint is not limited (its grant goes to the platform's own page)", async () => {
    const w = await workspace([APP]);
    const { grant } = await t.services.liveCalls.mint(
      { tenantId: w.tenantId, apiKeyId: w.apiKeyId, spendLimitCreditMicros: null, dashboardSessionId: 'dss_x' },
      { avatarId: w.avatarId, capacityPool: 'primary', maxDurationSeconds: 60 },
    );
    expect(grant.participantToken).toEqual(expect.any(String));
    expect(grant.joinToken).toBeUndefined();
  });
});

describe('POST /realtime/livekit/join', () => {
  it('happy: from an allowed origin the join token answers the LiveKit token once, with CORS headers; the token joins the room as the user; a second redeem is 410', async () => {
    const w = await workspace(['http://localhost:5173', APP]);
    const g = await mint(w);
    const first = await join(g.join_token, APP);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toEqual({
      session_id: g.session_id,
      server_url: g.server_url,
      participant_token: expect.any(String),
      avatar_identity: g.avatar_identity,
    });
    expect(first.res.headers.get('access-control-allow-origin')).toBe(APP);
    expect(first.res.headers.get('vary')).toMatch(/Origin/);
    expect(first.res.headers.get('access-control-allow-credentials')).toBeNull();

    const user = new Room();
    await user.connect(g.server_url, first.body.participant_token as string, { autoSubscribe: false, dynacast: false });
    try {
      expect(user.connectionState).toBe(ConnectionState.CONN_CONNECTED);
      const participants = await rooms.listParticipants(g.room_name);
      expect(participants.map((p) => p.identity)).toContain(g.participant_identity);
    } finally {
      await user.disconnect();
    }

    const again = await join(g.join_token, APP);
    expect(again.status).toBe(410);
    expect(again.body).toMatchObject({ code: 'join_token_used', field: 'join_token', retryable: false });
    expect(again.res.headers.get('access-control-allow-origin')).toBe(APP);
  });

  it('happy: the Origin is compared as browsers send it, scheme and host in any case', async () => {
    const w = await workspace([APP]);
    const g = await mint(w);
    expect((await join(g.join_token, 'HTTPS://App.Example.COM')).status).toBe(200);
  });

  it('security: another origin, no Origin, or an Origin that is no web origin is 403 origin_not_allowed, and the token stays unused', async () => {
    const w = await workspace([APP]);
    const g = await mint(w);
    for (const origin of [
      'https://evil.example.com',
      'http://app.example.com',
      'https://app.example.com:8443',
      'null',
      'file://',
      'https://app.example.com/x',
    ]) {
      const r = await join(g.join_token, origin);
      expect(r.status, origin).toBe(403);
      expect(r.body, origin).toMatchObject({ code: 'origin_not_allowed', field: 'Origin' });
    }
    const none = await join(g.join_token);
    expect(none.status).toBe(403);
    expect(none.body).toMatchObject({ code: 'origin_not_allowed', field: 'Origin' });
    expect(none.res.headers.get('access-control-allow-origin')).toBeNull();
    // A refusal must be readable by the page that made it (the embed shows it).
    const evil = await join(g.join_token, 'https://evil.example.com');
    expect(evil.res.headers.get('access-control-allow-origin')).toBe('https://evil.example.com');
    expect(await used(g.join_token!)).toBeNull();
    expect((await join(g.join_token, APP)).status).toBe(200);
  });

  it("security: a token minted while an origin was allowed is refused there once the workspace's origins exclude it", async () => {
    const w = await workspace([APP, 'https://old.example.com']);
    const g = await mint(w);
    const res = await t.request('PATCH', '/api/v1/workspace', { key: w.apiKey, body: { allowedOrigins: [APP] } });
    expect(res.status).toBe(200);
    expect((await join(g.join_token, 'https://old.example.com')).body).toMatchObject({ code: 'origin_not_allowed' });
    expect((await join(g.join_token, APP)).status).toBe(200);
  });

  it("security: a workspace's origins do not admit another workspace's tokens", async () => {
    const a = await workspace([APP]);
    await workspace(['https://b.example.com']);
    const g = await mint(a);
    expect((await join(g.join_token, 'https://b.example.com')).body).toMatchObject({ code: 'origin_not_allowed' });
  });

  it('security: two redeems at once: exactly one gets the token', async () => {
    const g = await mint(await workspace([APP]));
    const answers = await Promise.all(Array.from({ length: 8 }, () => join(g.join_token, APP)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 410, 410, 410, 410, 410, 410, 410]);
  });

  it('error: an expired token is 410 join_token_expired; a token whose call has ended too', async () => {
    const w = await workspace([APP]);
    const expired = await mint(w, { max_duration_seconds: 30 });
    await t.services.sql`
      update live_join_tokens set expires_at = now() - interval '1 second' where session_id = ${expired.session_id}`;
    const r = await join(expired.join_token, APP);
    expect(r.status).toBe(410);
    expect(r.body).toMatchObject({ code: 'join_token_expired', field: 'join_token' });

    const ended = await mint(w, { max_duration_seconds: 30 });
    const rel = await t.request('POST', RELEASE, { key: w.apiKey, body: { session_id: ended.session_id } });
    expect(rel.status).toBe(200);
    const e = await join(ended.join_token, APP);
    expect(e.status).toBe(410);
    expect(e.body).toMatchObject({ code: 'join_token_expired', error: expect.stringContaining('ended') });
  });

  it('error: an unknown token is 404 join_token_not_found; a bad body is 422 naming join_token', async () => {
    const unknown = await join(`sjt_${'x'.repeat(43)}`, APP);
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ code: 'join_token_not_found', field: 'join_token' });
    for (const bad of [undefined, '', 7, null, 'x'.repeat(257)]) {
      const r = await join(bad, APP);
      expect(r.status, JSON.stringify(bad)).toBe(422);
      expect(r.body).toMatchObject({ code: 'validation_error', field: 'join_token' });
    }
    const extra = await t.request('POST', JOIN, {
      body: { join_token: 'sjt_x', api_key: 'x' },
      headers: { origin: APP },
    });
    expect(extra.status).toBe(422);
  });

  it('security: malformed requests are never a 5xx, and never need an API key (401 is never answered)', async () => {
    const probes: { body?: string; headers?: Record<string, string> }[] = [
      { body: '{', headers: { 'content-type': 'application/json' } },
      { body: '[]', headers: { 'content-type': 'application/json' } },
      { body: '"sjt_x"', headers: { 'content-type': 'application/json' } },
      { body: '{"join_token":"sjt_\\u0000"}', headers: { 'content-type': 'application/json' } },
      { body: `{"join_token":"${'a'.repeat(5000)}"}`, headers: { 'content-type': 'application/json' } },
      { body: 'join_token=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
      { body: '{"join_token":"sjt_x"}', headers: { 'content-type': 'application/json', origin: '\u00ff' } },
      { body: '{"join_token":"sjt_x"}', headers: { 'content-type': 'application/json', origin: 'http://[' } },
      { body: '{"join_token":"sjt_x"}', headers: { 'content-type': 'application/json', authorization: 'Bearer nope' } },
      { body: new Uint8Array([0xff, 0xfe]).toString(), headers: { 'content-type': 'application/json' } },
    ];
    for (const p of probes) {
      const res = await t.app.request(JOIN, { method: 'POST', body: p.body, headers: { origin: APP, ...p.headers } });
      expect(res.status, JSON.stringify(p)).toBeLessThan(500);
      expect(res.status, JSON.stringify(p)).not.toBe(401);
      expect(res.status, JSON.stringify(p)).toBeGreaterThanOrEqual(400);
      expect((await json(res)).requestId).toMatch(/^req_/);
    }
    expect((await t.app.request(JOIN, { method: 'GET' })).status).toBe(405);
  });

  it('happy: the CORS preflight is answered for any origin: POST with content-type, no credentials', async () => {
    const res = await t.app.request(JOIN, {
      method: 'OPTIONS',
      headers: {
        origin: APP,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
    expect(res.headers.get('access-control-allow-methods')).toBe('POST');
    expect(res.headers.get('access-control-allow-headers')?.toLowerCase()).toBe('content-type');
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();
    expect(res.headers.get('vary')).toMatch(/Origin/);
  });
});
