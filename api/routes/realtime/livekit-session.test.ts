import { ConnectionState, Room, RoomEvent } from '@livekit/rtc-node';
import { AgentDispatchClient, RoomServiceClient, TrackSource } from 'livekit-server-sdk';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MICROS_PER_SECOND } from '../../../core/credits/ledger.ts';
import { randomBase62 } from '../../../core/platform/ids.ts';
import { LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET, freePort } from '../../../test/deps.ts';
import { json, testApi, waitFor, type TestApi } from '../../../test/helpers.ts';
import { checkLedgerInvariants } from '../../../test/ledger-invariants.ts';
import { captureDispatches, liveKitEnv, receiveLiveKitWebhooks } from '../../../test/livekit.ts';
import {
  CAPACITY,
  changesNothing,
  footprint,
  MINT,
  readyAvatar,
  RELEASE,
  scene,
  setSlots,
  type GrantBody,
} from './test-support.ts';

const SEC = MICROS_PER_SECOND;
const env = liveKitEnv();
const t = await testApi({ env });
const rooms = new RoomServiceClient(inject('livekitUrl').replace(/^ws/, 'http'), LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET);
const dispatches = new AgentDispatchClient(
  inject('livekitUrl').replace(/^ws/, 'http'),
  LIVEKIT_DEV_KEY,
  LIVEKIT_DEV_SECRET,
);
let agent: Awaited<ReturnType<typeof captureDispatches>>;
let webhooks: Awaited<ReturnType<typeof receiveLiveKitWebhooks>>;

beforeAll(async () => {
  agent = await captureDispatches(env.AGENT_NAME!);
  webhooks = await receiveLiveKitWebhooks(t.app.fetch);
  await setSlots(t, 'primary', 50);
});
afterAll(async () => {
  await webhooks?.stop();
  await agent?.stop();
  await t.close();
});

async function workspace(credits = 100, o: { maxConcurrentSessions?: number } = {}) {
  const tenant = await t.newTenant({ credits });
  if (o.maxConcurrentSessions !== undefined)
    await t.services.tenants.setLimits(tenant.tenantId, { maxConcurrentSessions: o.maxConcurrentSessions });
  const avatarId = await readyAvatar(t, tenant.tenantId);
  return { ...tenant, avatarId };
}

async function mint(key: string, body: Record<string, unknown>) {
  const res = await t.request('POST', MINT, { key, body });
  return { status: res.status, body: await json(res), res };
}

async function release(key: string, body: Record<string, unknown>) {
  const res = await t.request('POST', RELEASE, { key, body });
  return { status: res.status, body: await json(res) };
}

const roomExists = async (name: string) => (await rooms.listRooms([name])).some((r) => r.name === name);

describe('POST /realtime/livekit/session (mint) on the real LiveKit server', () => {
  it('happy: grants a call: the user token joins (microphone only), the agent gets the dispatch {"session_id"}, release closes the room', async () => {
    const w = await workspace(100);
    const minted = await mint(w.apiKey, { avatar_id: w.avatarId, client_metadata: { user_id: 'end-user-7' } });
    expect(minted.status, JSON.stringify(minted.body)).toBe(200);
    const g = minted.body as unknown as GrantBody;
    expect(Object.keys(g).sort()).toEqual(
      [
        'avatar_identity',
        'capacity_pool',
        'expires_at',
        'max_duration_seconds',
        'participant_identity',
        'participant_token',
        'room_name',
        'server_url',
        'session_id',
      ].sort(),
    );
    expect(g.session_id).toMatch(/^ses_/);
    expect(g).toMatchObject({
      room_name: `avatar-${g.session_id}`,
      participant_identity: `user-${g.session_id}`,
      avatar_identity: `avatar-${g.session_id}`,
      capacity_pool: 'primary',
      server_url: inject('livekitUrl'),
      // 600 s asked by default, 100 s of credits: the grant says what the reservation pays for.
      max_duration_seconds: 100,
    });
    expect(Date.parse(g.expires_at)).toBeGreaterThan(Date.now());
    expect(minted.res.headers.get('server-timing')).toMatch(
      /^own;dur=[\d.]+, livekit-room;dur=[\d.]+, livekit-dispatch;dur=[\d.]+$/,
    );
    expect(await t.services.ledger.balance(w.tenantId)).toMatchObject({
      balanceCreditMicros: 100 * SEC,
      reservedCreditMicros: 100 * SEC,
    });
    expect(await t.services.liveSessions.get(g.session_id)).toMatchObject({
      mode: 'conversation',
      state: 'pending',
      roomName: g.room_name,
      userIdentity: g.participant_identity,
      avatarIdentity: g.avatar_identity,
      agentIdentity: `agent-${g.session_id}`,
      capacityPool: 'primary',
      maxDurationSeconds: 100,
      record: false,
    });
    expect(await t.services.usage.get(w.tenantId, g.session_id)).toMatchObject({
      kind: 'live',
      status: 'reserved',
      endUserId: 'end-user-7',
      avatarId: w.avatarId,
    });

    const dispatch = await waitFor(
      () => `the agent to receive the dispatch into ${g.room_name} (it saw ${JSON.stringify(agent.requests)})`,
      () => agent.requests.find((r) => r.room === g.room_name),
    );
    expect(dispatch).toEqual({
      room: g.room_name,
      agentName: env.AGENT_NAME,
      metadata: JSON.stringify({ session_id: g.session_id }),
    });
    expect(dispatch.metadata).toBe(`{"session_id":"${g.session_id}"}`);

    const user = new Room();
    const disconnected = new Promise<void>((resolve) => user.on(RoomEvent.Disconnected, () => resolve()));
    await user.connect(g.server_url, g.participant_token!, { autoSubscribe: false, dynacast: false });
    try {
      expect(user.connectionState).toBe(ConnectionState.CONN_CONNECTED);
      const [p] = await rooms.listParticipants(g.room_name);
      expect(p?.identity).toBe(g.participant_identity);
      expect(p?.permission).toMatchObject({
        canPublish: true,
        canSubscribe: true,
        canPublishData: true,
        canPublishSources: [TrackSource.MICROPHONE],
      });
      // The user's join arrives as a signed webhook and is recorded as connection history.
      const joined = await waitFor('the participant_joined webhook to be recorded', async () => {
        const rows = await t.services
          .sql`select 1 from connection_events where session_id = ${g.session_id} and kind = 'joined' and source = 'webhook'`;
        return rows.length > 0 ? true : undefined;
      });
      expect(joined).toBe(true);
      const history = await t.request('GET', `/api/v1/sessions/${g.session_id}/connection-history`, { key: w.apiKey });
      expect(history.status).toBe(200);
      expect((await json<{ data: unknown[] }>(history)).data).toContainEqual({
        participantIdentity: g.participant_identity,
        role: 'user',
        kind: 'joined',
        trackKind: null,
        trackSource: null,
        occurredAt: expect.any(String),
        source: 'webhook',
      });

      const released = await release(w.apiKey, { session_id: g.session_id, reason: 'manual' });
      expect(released.status).toBe(200);
      expect(released.body).toEqual({
        session_id: g.session_id,
        state: 'ended',
        end_reason: 'manual',
        ended_at: expect.any(String),
        // Never started (the avatar never joined): nothing billed.
        usage_status: 'failed',
        billed_credit_micros: 0,
        capacity_pool: 'primary',
      });
      await disconnected;
      expect(await roomExists(g.room_name)).toBe(false);
      // Idempotent: the same answer again.
      expect(await release(w.apiKey, { session_id: g.session_id, reason: 'page_hide' })).toEqual(released);
    } finally {
      await user.disconnect();
    }
    expect(await t.services.ledger.balance(w.tenantId)).toMatchObject({
      balanceCreditMicros: 100 * SEC,
      reservedCreditMicros: 0,
    });
    expect((await t.services.capacity.coordinator.holders('primary')).map((h) => h.holder)).not.toContain(g.session_id);
    await checkLedgerInvariants(t.services.sql, [w.tenantId], [w.apiKeyId]);
  }, 120_000);

  it('happy: bills a started call from its start to its end (usage reserved → started → released), within the reservation; endUserId narrows the usage list', async () => {
    const w = await workspace(100);
    const g = (
      await mint(w.apiKey, { avatar_id: w.avatarId, max_duration_seconds: 60, client_metadata: { user_id: 'u-bill' } })
    ).body as unknown as GrantBody;
    expect(g.max_duration_seconds).toBe(60);
    // What the worker reports (agent/worker.ts through LiveSessionStore): claimed, joined, both present.
    const live = t.services.liveSessions;
    expect(await live.claim(g.session_id, 'wrk_test')).toBeDefined();
    await live.joined(g.session_id);
    await live.started(g.session_id, new Date(Date.now() - 5000));
    expect(await t.services.usage.get(w.tenantId, g.session_id)).toMatchObject({ status: 'started' });
    const released = await release(w.apiKey, { session_id: g.session_id, reason: 'unmount' });
    expect(released.body).toMatchObject({ usage_status: 'released', end_reason: 'unmount' });
    const billed = released.body.billed_credit_micros as number;
    expect(billed).toBeGreaterThanOrEqual(5 * SEC);
    expect(billed).toBeLessThanOrEqual(60 * SEC);
    const page = await json<{ data: { sessionId: string; status: string; billedCreditMicros: number }[] }>(
      await t.request('GET', '/api/v1/usage/sessions?endUserId=u-bill', { key: w.apiKey }),
    );
    expect(page.data).toEqual([
      expect.objectContaining({ sessionId: g.session_id, status: 'released', billedCreditMicros: billed }),
    ]);
    expect(await t.services.ledger.balance(w.tenantId)).toMatchObject({
      balanceCreditMicros: 100 * SEC - billed,
      reservedCreditMicros: 0,
    });
    await checkLedgerInvariants(t.services.sql, [w.tenantId], [w.apiKeyId]);
  });

  it("happy: provider mode: no room created and no user token, the agent is dispatched into the caller's room, release leaves that room", async () => {
    const w = await workspace(100);
    const name = `customer-${randomBase62(8)}`;
    await rooms.createRoom({ name, emptyTimeout: 60 });
    const minted = await mint(w.apiKey, { avatar_id: w.avatarId, room: { name, agent_identity: 'their-agent' } });
    expect(minted.status, JSON.stringify(minted.body)).toBe(200);
    const g = minted.body as unknown as GrantBody;
    expect(g).toMatchObject({
      room_name: name,
      participant_token: null,
      participant_identity: null,
      avatar_identity: `avatar-${g.session_id}`,
    });
    expect(await t.services.liveSessions.get(g.session_id)).toMatchObject({
      mode: 'provider',
      roomName: name,
      userIdentity: null,
      agentIdentity: 'their-agent',
    });
    // LiveKit's record of the dispatch (what a worker of AGENT_NAME is offered); LiveKit lists its
    // room-wide default dispatch of unnamed agents too.
    const named = (await dispatches.listDispatch(name)).filter((d) => d.agentName !== '');
    expect(named.map((d) => ({ agentName: d.agentName, metadata: d.metadata }))).toEqual([
      { agentName: env.AGENT_NAME, metadata: `{"session_id":"${g.session_id}"}` },
    ]);
    expect((await release(w.apiKey, { session_id: g.session_id })).body).toMatchObject({
      state: 'ended',
      end_reason: 'released',
    });
    expect(await roomExists(name)).toBe(true);
    await rooms.deleteRoom(name);
  });

  it('error: record: omitted follows the workspace policy; true while the policy is off is 403 recordings_not_enabled with nothing reserved', async () => {
    const w = await workspace(10_000);
    await changesNothing(t, w.tenantId, async () => {
      const r = await mint(w.apiKey, { avatar_id: w.avatarId, record: true });
      expect(r.status).toBe(403);
      expect(r.body).toMatchObject({ code: 'recordings_not_enabled', retryable: false });
    });
    const off = (await mint(w.apiKey, { avatar_id: w.avatarId })).body as unknown as GrantBody;
    expect((await t.services.liveSessions.get(off.session_id))?.record).toBe(false);
    await t.services.sql`update tenants set recordings_enabled = true where id = ${w.tenantId}`;
    const on = (await mint(w.apiKey, { avatar_id: w.avatarId })).body as unknown as GrantBody;
    const notThis = (await mint(w.apiKey, { avatar_id: w.avatarId, record: false })).body as unknown as GrantBody;
    expect((await t.services.liveSessions.get(on.session_id))?.record).toBe(true);
    expect((await t.services.liveSessions.get(notThis.session_id))?.record).toBe(false);
    for (const g of [off, on, notThis]) await release(w.apiKey, { session_id: g.session_id });
  });
});

describe('mint refusals: each in its order, nothing reserved, held or billed', () => {
  it("error: 404 for an unknown, malformed, deleted or other tenant's avatar; 409 avatar_state_conflict when not ready", async () => {
    const w = await workspace(100);
    const other = await workspace(100);
    const deleted = await readyAvatar(t, w.tenantId, { deleted: true });
    const preprocessing = await readyAvatar(t, w.tenantId, { status: 'preprocessing' });
    await changesNothing(t, w.tenantId, async () => {
      for (const avatar_id of ['ava_doesnotexist', 'not-an-id', deleted, other.avatarId]) {
        const r = await mint(w.apiKey, { avatar_id });
        expect(r.status, avatar_id).toBe(404);
        expect(r.body.code).toBe('not_found');
      }
      const r = await mint(w.apiKey, { avatar_id: preprocessing });
      expect(r.status).toBe(409);
      expect(r.body.code).toBe('avatar_state_conflict');
    });
  });

  it("error: scenes: 403 not enabled, 404 unknown/expired/failed/another workspace's, 409 building, 429 beyond 2 concurrent scene calls", async () => {
    const w = await workspace(10_000);
    const other = await workspace(100);
    const ready = await scene(t, w.tenantId);
    const refused = async (body: Record<string, unknown>, status: number, code: string) => {
      await changesNothing(t, w.tenantId, async () => {
        const r = await mint(w.apiKey, { avatar_id: w.avatarId, ...body });
        expect(r.status, JSON.stringify(r.body)).toBe(status);
        expect(r.body.code).toBe(code);
      });
    };
    await refused({ scene: { video_cache_id: ready } }, 403, 'scene_sessions_not_enabled');
    await t.services.tenants.setSwitch(w.tenantId, 'scene_sessions', true);
    await refused({ scene: { video_cache_id: 'vc_unknown' } }, 404, 'scene_not_found');
    await refused({ scene: { video_cache_id: await scene(t, other.tenantId) } }, 404, 'scene_not_found');
    await refused({ scene: { video_cache_id: await scene(t, w.tenantId, { expired: true }) } }, 404, 'scene_not_found');
    await refused(
      { scene: { video_cache_id: await scene(t, w.tenantId, { status: 'failed' }) } },
      404,
      'scene_not_found',
    );
    await refused(
      { scene: { video_cache_id: await scene(t, w.tenantId, { status: 'building' }) } },
      409,
      'scene_not_ready',
    );

    const calls = [];
    for (let i = 0; i < 2; i++) {
      const r = await mint(w.apiKey, { avatar_id: w.avatarId, scene: { video_cache_id: ready } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      calls.push(r.body as unknown as GrantBody);
    }
    expect(await t.services.liveSessions.get(calls[0]!.session_id)).toMatchObject({
      videoCacheId: ready,
      sceneId: expect.stringMatching(/^scn_/),
    });
    await refused({ scene: { video_cache_id: ready } }, 429, 'scene_concurrency_limit_reached');
    // A call without a scene is not a scene call.
    const plain = await mint(w.apiKey, { avatar_id: w.avatarId });
    expect(plain.status).toBe(200);
    await release(w.apiKey, { session_id: calls[0]!.session_id });
    const again = await mint(w.apiKey, { avatar_id: w.avatarId, scene: { video_cache_id: ready } });
    expect(again.status).toBe(200);
    for (const g of [calls[1]!, plain.body as unknown as GrantBody, again.body as unknown as GrantBody])
      await release(w.apiKey, { session_id: g.session_id });
  });

  it('error: 503 clip_library_not_ready (retryable) while the idle pool has only pending members', async () => {
    const w = await workspace(100);
    const pending = await readyAvatar(t, w.tenantId, { pendingIdleClip: true });
    await changesNothing(t, w.tenantId, async () => {
      const r = await mint(w.apiKey, { avatar_id: pending });
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ code: 'clip_library_not_ready', retryable: true });
    });
  });

  it('error: 402 below the reservation floor; credits short of the asked duration shorten the call instead', async () => {
    const poor = await workspace(10);
    await changesNothing(t, poor.tenantId, async () => {
      const r = await mint(poor.apiKey, { avatar_id: poor.avatarId });
      expect(r.status).toBe(402);
      expect(r.body).toMatchObject({ code: 'insufficient_credits', billingUrl: '/platform/billing' });
      expect((await mint(poor.apiKey, { avatar_id: poor.avatarId, max_duration_seconds: 20 })).status).toBe(402);
    });
    // Asking for less than the floor needs only that much.
    const short = await mint(poor.apiKey, { avatar_id: poor.avatarId, max_duration_seconds: 8 });
    expect(short.body).toMatchObject({ max_duration_seconds: 8 });
    const some = await workspace(45);
    const g = (await mint(some.apiKey, { avatar_id: some.avatarId, max_duration_seconds: 600 }))
      .body as unknown as GrantBody;
    expect(g.max_duration_seconds).toBe(45);
    expect((await t.services.ledger.balance(some.tenantId)).reservedCreditMicros).toBe(45 * SEC);

    const limited = await t.newTenant({ credits: 1000, spendLimitCreditMicros: 5 * SEC });
    const avatar = await readyAvatar(t, limited.tenantId);
    await changesNothing(t, limited.tenantId, async () => {
      const r = await mint(limited.apiKey, { avatar_id: avatar });
      expect(r.status).toBe(402);
      expect(r.body.code).toBe('spend_limit_exceeded');
    });
    for (const [k, id] of [
      [poor.apiKey, (short.body as unknown as GrantBody).session_id],
      [some.apiKey, g.session_id],
    ] as const)
      await release(k, { session_id: id });
  });

  it("security: a key minted under a spend-limited key gets only the room its minter's limit has left (402 naming the minter)", async () => {
    const w = await workspace(1000);
    const { record: parent } = await t.services.keys.create({
      tenantId: w.tenantId,
      name: 'parent',
      scopes: ['*'],
      spendLimitCreditMicros: 100 * SEC,
    });
    const { apiKey: child } = await t.services.keys.create({
      tenantId: w.tenantId,
      name: 'child',
      scopes: ['*'],
      spendLimitCreditMicros: 100 * SEC,
      parentId: parent.id,
    });
    const held = await t.services.ledger.reserve({
      tenantId: w.tenantId,
      apiKeyId: parent.id,
      amountCreditMicros: 60 * SEC,
      purpose: 'turn',
      ttlSeconds: 600,
    });
    // The child's own limit has 100 s of room; its minter's has 40 s.
    const g = (await mint(child, { avatar_id: w.avatarId })).body as unknown as GrantBody;
    expect(g.max_duration_seconds).toBe(40);
    await release(child, { session_id: g.session_id });
    await t.services.ledger.reserve({
      tenantId: w.tenantId,
      apiKeyId: parent.id,
      amountCreditMicros: 39 * SEC + SEC / 2,
      purpose: 'turn',
      ttlSeconds: 600,
    });
    await changesNothing(t, w.tenantId, async () => {
      const r = await mint(child, { avatar_id: w.avatarId });
      expect(r.status).toBe(402);
      expect(r.body).toMatchObject({ code: 'spend_limit_exceeded', spendLimitKeyId: parent.id });
    });
    await t.services.ledger.settle(held.id, 0);
  });

  it('error: 429 concurrency_limit_reached with the counters, pending and connecting calls counted', async () => {
    const w = await workspace(10_000, { maxConcurrentSessions: 2 });
    const a = (await mint(w.apiKey, { avatar_id: w.avatarId })).body as unknown as GrantBody;
    const b = (await mint(w.apiKey, { avatar_id: w.avatarId })).body as unknown as GrantBody;
    await t.services.liveSessions.joined(b.session_id);
    await changesNothing(t, w.tenantId, async () => {
      const r = await mint(w.apiKey, { avatar_id: w.avatarId });
      expect(r.status).toBe(429);
      expect(r.body).toMatchObject({
        code: 'concurrency_limit_reached',
        retryable: true,
        maxConcurrentSessions: 2,
        liveSessions: 2,
        activeSessions: 0,
        connectingSessions: 1,
        pendingSessions: 1,
      });
      expect(r.body).not.toHaveProperty('queue_ticket_id');
    });
    await release(w.apiKey, { session_id: a.session_id });
    const c = await mint(w.apiKey, { avatar_id: w.avatarId });
    expect(c.status).toBe(200);
    for (const g of [b, c.body as unknown as GrantBody]) await release(w.apiKey, { session_id: g.session_id });
  });

  it('error: the first refusal wins: an unknown avatar with no credits is 404; a not-ready avatar over the concurrency limit is 409', async () => {
    const broke = await t.newTenant();
    expect((await mint(broke.apiKey, { avatar_id: 'ava_unknown' })).status).toBe(404);
    const w = await workspace(1000, { maxConcurrentSessions: 0 });
    const notReady = await readyAvatar(t, w.tenantId, { status: 'failed' });
    expect((await mint(w.apiKey, { avatar_id: notReady })).status).toBe(409);
    expect((await mint(w.apiKey, { avatar_id: w.avatarId })).body.code).toBe('concurrency_limit_reached');
  });

  it('error: bad input is 422 naming the field (casing, unknown fields, clip_library/clip_behavior/choreography, bounds), 413 over 64 KiB: nothing reserved', async () => {
    const w = await workspace(100);
    const cases: [Record<string, unknown>, string][] = [
      // Mis-cased: the snake_case field is missing (the first problem), or the mis-cased one is unknown.
      [{ avatarId: w.avatarId }, 'avatar_id'],
      [{ avatar_id: w.avatarId, Record: true }, 'Record'],
      [{ avatar_id: w.avatarId, clip_library: {} }, 'clip_library'],
      [{ avatar_id: w.avatarId, clip_behavior: { idle: { clips: [] } } }, 'clip_behavior'],
      [{ avatar_id: w.avatarId, choreography: [] }, 'choreography'],
      [{ avatar_id: w.avatarId, capacityPool: 'primary' }, 'capacityPool'],
      [{ avatar_id: w.avatarId, client_metadata: { userId: 'x' } }, 'client_metadata.userId'],
      [{ avatar_id: w.avatarId, scene: { video_cache_id: 'vc_x', videoCacheId: 'vc_x' } }, 'scene.videoCacheId'],
      [{ avatar_id: w.avatarId, capacity_pool: 'Primary' }, 'capacity_pool'],
      [{ avatar_id: w.avatarId, max_duration_seconds: 0 }, 'max_duration_seconds'],
      [{ avatar_id: w.avatarId, max_duration_seconds: 20_000 }, 'max_duration_seconds'],
      [{ avatar_id: w.avatarId, max_duration_seconds: 1.5 }, 'max_duration_seconds'],
      [{ avatar_id: w.avatarId, room: { name: 'avatar-ses_x', agent_identity: 'a' } }, 'room.name'],
      [{ avatar_id: w.avatarId, room: { name: 'r' } }, 'room.agent_identity'],
      [{ avatar_id: w.avatarId, record: 'yes' }, 'record'],
    ];
    await changesNothing(t, w.tenantId, async () => {
      for (const [body, field] of cases) {
        const r = await mint(w.apiKey, body);
        expect(r.status, JSON.stringify(body)).toBe(422);
        expect(r.body.field, JSON.stringify(body)).toBe(field);
      }
      const big = await t.request('POST', MINT, {
        key: w.apiKey,
        body: { avatar_id: w.avatarId, client_metadata: { user_id: 'x'.repeat(70_000) } },
      });
      expect(big.status).toBe(413);
    });
  });
});

describe('release', () => {
  it("error: 422 for a reason outside the set (nothing freed: the call stays, its slot held); 404 for another workspace's or unknown ids; one id exactly; 413 over 4 KiB", async () => {
    const w = await workspace(100);
    const other = await workspace(100);
    const g = (await mint(w.apiKey, { avatar_id: w.avatarId })).body as unknown as GrantBody;
    const ours = async () => footprint(t, w.tenantId);
    const before = await ours();
    expect(before.sessions).toEqual([`${g.session_id}:pending`]);
    const bad: [Record<string, unknown>, number, string | null][] = [
      [{ session_id: g.session_id, reason: 'user_closed_tab' }, 422, 'reason'],
      [{ session_id: g.session_id, reason: 'Manual' }, 422, 'reason'],
      [{ session_id: g.session_id, queue_ticket_id: 'qtk_x' }, 422, 'queue_ticket_id'],
      [{}, 422, 'session_id'],
      [{ sessionId: g.session_id }, 422, 'sessionId'],
      [{ session_id: g.session_id, capacity_pool: 'NOPE' }, 422, 'capacity_pool'],
    ];
    for (const [body, status, field] of bad) {
      const r = await release(w.apiKey, body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(r.body.field, JSON.stringify(body)).toBe(field);
    }
    for (const body of [
      { session_id: g.session_id },
      { session_id: 'ses_unknown' },
      { queue_ticket_id: 'qtk_unknown' },
    ]) {
      expect((await release(other.apiKey, body)).status, JSON.stringify(body)).toBe(404);
    }
    const big = await t.request('POST', RELEASE, {
      key: w.apiKey,
      body: { session_id: g.session_id, capacity_pool: 'a'.repeat(5000) },
    });
    expect(big.status).toBe(413);
    expect(await ours()).toEqual(before);
    expect((await t.services.capacity.coordinator.holders('primary')).map((h) => h.holder)).toContain(g.session_id);
    await release(w.apiKey, { session_id: g.session_id });
  });
});

describe('capacity', () => {
  it("happy: GET /realtime/livekit/capacity: the operator's slots, else the declared ones, with holders, queue and workers", async () => {
    const w = await workspace(100);
    const pool = `p${randomBase62(6).toLowerCase()}`;
    const snap = async () => json(await t.request('GET', `${CAPACITY}?capacity_pool=${pool}`, { key: w.apiKey }));
    expect(await snap()).toEqual({ capacity_pool: pool, slots: 0, in_use: 0, available: 0, queue_size: 0, workers: 0 });
    await t.services.agentWorkers.declare({ id: `wrk_${randomBase62(8)}`, capacityPool: pool, slots: 3 });
    expect(await snap()).toMatchObject({ slots: 3, available: 3, workers: 1 });
    const g = (await mint(w.apiKey, { avatar_id: w.avatarId, capacity_pool: pool })).body as unknown as GrantBody;
    expect(g.capacity_pool).toBe(pool);
    expect(await snap()).toMatchObject({ slots: 3, in_use: 1, available: 2 });
    await setSlots(t, pool, 1);
    expect(await snap()).toEqual({ capacity_pool: pool, slots: 1, in_use: 1, available: 0, queue_size: 0, workers: 1 });
    const primary = await json(await t.request('GET', CAPACITY, { key: w.apiKey }));
    expect(primary).toMatchObject({ capacity_pool: 'primary', slots: 50 });
    expect((await t.request('GET', `${CAPACITY}?capacity_pool=Bad!`, { key: w.apiKey })).status).toBe(422);
    await release(w.apiKey, { session_id: g.session_id });
    expect(await snap()).toMatchObject({ in_use: 0, available: 1 });
  });

  it('happy: a full pool fails over to another with room; with none, 429 with exactly the queue fields and the request id in the header only', async () => {
    const w = await workspace(10_000, { maxConcurrentSessions: 20 });
    // Only this test's pools have slots meanwhile.
    const pools = [...(await t.services.capacity.pools()).keys()];
    for (const p of pools) await setSlots(t, p, 0);
    const full = `f${randomBase62(6).toLowerCase()}`;
    const spare = `s${randomBase62(6).toLowerCase()}`;
    await setSlots(t, full, 1);
    await setSlots(t, spare, 1);
    const calls: GrantBody[] = [];
    try {
      const first = (await mint(w.apiKey, { avatar_id: w.avatarId, capacity_pool: full, max_duration_seconds: 60 }))
        .body as unknown as GrantBody;
      expect(first.capacity_pool).toBe(full);
      // The spare pool has room: the second mint asked for the full pool runs there.
      const moved = (await mint(w.apiKey, { avatar_id: w.avatarId, capacity_pool: full, max_duration_seconds: 60 }))
        .body as unknown as GrantBody;
      expect(moved.capacity_pool).toBe(spare);
      expect((await t.services.liveSessions.get(moved.session_id))?.capacityPool).toBe(spare);
      calls.push(first, moved);

      const before = await footprint(t, w.tenantId, full);
      const q = await mint(w.apiKey, { avatar_id: w.avatarId, capacity_pool: full });
      expect(q.status).toBe(429);
      expect(Object.keys(q.body).sort()).toEqual(['queue_size', 'queue_ticket_id', 'recommended_retry_ms']);
      expect(q.body).toMatchObject({ queue_ticket_id: expect.stringMatching(/^qtk_/), queue_size: 1 });
      expect(q.res.headers.get('x-request-id')).toMatch(/^req_/);
      expect(Number(q.res.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await footprint(t, w.tenantId, full)).toEqual({ ...before, queued: 1 });
      // Sent back while still full: the same ticket, the same place.
      const again = await mint(w.apiKey, {
        avatar_id: w.avatarId,
        capacity_pool: full,
        queue_ticket_id: q.body.queue_ticket_id,
      });
      expect(again.body).toMatchObject({ queue_ticket_id: q.body.queue_ticket_id, queue_size: 1 });
      // Leaving the queue with the ticket; another workspace cannot.
      const other = await workspace(10);
      expect((await release(other.apiKey, { queue_ticket_id: q.body.queue_ticket_id as string })).status).toBe(404);
      const left = await release(w.apiKey, { queue_ticket_id: q.body.queue_ticket_id as string });
      expect(left).toEqual({
        status: 200,
        body: { queue_ticket_id: q.body.queue_ticket_id, state: 'left_queue', capacity_pool: full },
      });
      expect(await release(w.apiKey, { queue_ticket_id: q.body.queue_ticket_id as string })).toEqual(left);
      expect((await t.services.capacity.snapshot(full)).queueSize).toBe(0);
    } finally {
      for (const g of calls) await release(w.apiKey, { session_id: g.session_id });
      for (const p of [...pools, full, spare]) await t.services.capacity.setPoolSlots(p, null);
      await setSlots(t, 'primary', 50);
    }
  });
});

describe('without LiveKit or capacity', () => {
  it('error: 503 capacity_unavailable when no pool has any slot, or LiveKit is not configured; nothing reserved', async () => {
    const bare = await testApi({ env: { ...liveKitEnv() } });
    const none = await testApi();
    try {
      for (const app of [bare, none]) {
        const tenant = await app.newTenant({ credits: 100 });
        const avatar = await readyAvatar(app, tenant.tenantId);
        await changesNothing(app, tenant.tenantId, async () => {
          const r = await app.request('POST', MINT, { key: tenant.apiKey, body: { avatar_id: avatar } });
          expect(r.status).toBe(503);
          expect(await json(r)).toMatchObject({ code: 'capacity_unavailable', retryable: true });
        });
      }
    } finally {
      await bare.close();
      await none.close();
    }
  });

  it('error: 503 session_dispatch_failed when LiveKit refuses the room (wrong secret) or cannot be reached: the call ends failed, slot and reservation freed', async () => {
    const wrongSecret = await testApi({ env: { ...liveKitEnv(), LIVEKIT_API_SECRET: 'not-the-secret' } });
    const unreachable = await testApi({ env: { ...liveKitEnv(), LIVEKIT_URL: `ws://127.0.0.1:${await freePort()}` } });
    try {
      for (const app of [wrongSecret, unreachable] as TestApi[]) {
        await setSlots(app, 'primary', 2);
        const tenant = await app.newTenant({ credits: 100 });
        const avatar = await readyAvatar(app, tenant.tenantId);
        const r = await app.request('POST', MINT, { key: tenant.apiKey, body: { avatar_id: avatar } });
        expect(r.status).toBe(503);
        expect(await json(r)).toMatchObject({ code: 'session_dispatch_failed', retryable: true });
        const [row] = await app.services.sql<
          { id: string; state: string; end_reason: string }[]
        >`select id, state, end_reason from live_sessions where tenant_id = ${tenant.tenantId}`;
        expect(row).toMatchObject({ state: 'ended', end_reason: 'dispatch_failed' });
        expect(await app.services.usage.get(tenant.tenantId, row!.id)).toMatchObject({
          status: 'failed',
          billedCreditMicros: 0,
        });
        expect(await app.services.ledger.balance(tenant.tenantId)).toMatchObject({
          balanceCreditMicros: 100 * SEC,
          reservedCreditMicros: 0,
        });
        expect((await app.services.capacity.snapshot('primary')).inUse).toBe(0);
      }
    } finally {
      await wrongSecret.close();
      await unreachable.close();
    }
  });
});
