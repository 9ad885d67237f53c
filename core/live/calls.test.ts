import { afterAll, describe, expect, it } from 'vitest';
import { readyAvatar } from '../../api/routes/realtime/test-support.ts';
import { liveKitEnv } from '../../test/livekit.ts';
import { expectApiError, testApi } from '../../test/helpers.ts';
import { randomBase62 } from '../platform/ids.ts';
import type { Caller, MintInput } from './calls.ts';

// LiveCalls.mint in its parts, below the route: the admission's policy checks, the capacity queue's
// answer, and a failed insert freeing the slot it took. The route's tests (api/routes/realtime/
// livekit-session.test.ts) cover the grant, the refusals in order and the dispatch.
const t = await testApi({ env: liveKitEnv() });
const noLiveKit = await testApi();
afterAll(async () => {
  await t.close();
  await noLiveKit.close();
});

/** A workspace with a ready avatar and 100 s of credits, as the caller of a mint. */
async function caller(api = t): Promise<{ caller: Caller; avatarId: string }> {
  const { tenantId, apiKeyId } = await api.newTenant({ credits: 100 });
  return { caller: { tenantId, apiKeyId, spendLimitCreditMicros: null }, avatarId: await readyAvatar(api, tenantId) };
}

/** A pool of its own with `slots` slots, so no other test's calls take them. */
async function pool(slots: number): Promise<string> {
  const name = `calls-${randomBase62(8).toLowerCase()}`;
  await t.services.capacity.setPoolSlots(name, slots);
  return name;
}

const input = (avatarId: string, capacityPool: string, o: Partial<MintInput> = {}): MintInput => ({
  avatarId,
  capacityPool,
  maxDurationSeconds: 60,
  ...o,
});

describe('LiveCalls.mint', () => {
  it('error: queues mints beyond the pool, each told to come back later the further back it stands (1 s, then 250 ms a place)', async () => {
    const name = await pool(1);
    const { caller: c, avatarId } = await caller();
    const { grant } = await t.services.liveCalls.mint(c, input(avatarId, name));
    const queued = [];
    for (let i = 0; i < 3; i++)
      queued.push(await expectApiError(t.services.liveCalls.mint(c, input(avatarId, name)), 'capacity_queued', 429));
    expect(queued.map((e) => [e.extra.queue_size, e.extra.recommended_retry_ms, e.headers['Retry-After']])).toEqual([
      [1, 1000, '1'],
      [2, 1250, '2'],
      [3, 1500, '2'],
    ]);
    expect(new Set(queued.map((e) => e.extra.queue_ticket_id)).size).toBe(3);
    // Queued mints hold nothing: one call, one reservation.
    expect(await t.services.capacity.snapshot(name)).toMatchObject({ inUse: 1, queueSize: 3 });
    expect((await t.services.ledger.balance(c.tenantId)).reservedCreditMicros).toBe(60 * 1_000_000);
    await t.services.liveCalls.release(c, { sessionId: grant.sessionId });
  });

  it('error: a call whose rows cannot be written frees the slot it took, reserves nothing, and the next mint gets that slot', async () => {
    const name = await pool(1);
    const { caller: c, avatarId } = await caller();
    // PostgreSQL refuses a NUL in text: the usage row's insert fails after the slot was taken.
    await expect(t.services.liveCalls.mint(c, input(avatarId, name, { endUserId: 'user\u0000' }))).rejects.toThrow();
    expect(await t.services.capacity.snapshot(name)).toMatchObject({ inUse: 0, queueSize: 0 });
    expect((await t.services.ledger.balance(c.tenantId)).reservedCreditMicros).toBe(0);
    expect(await t.services.sql`select id from live_sessions where tenant_id = ${c.tenantId}`).toHaveLength(0);

    const { grant } = await t.services.liveCalls.mint(c, input(avatarId, name));
    expect(grant.capacityPool).toBe(name);
    await t.services.liveCalls.release(c, { sessionId: grant.sessionId });
  });

  it('error: without LiveKit the plan limit still answers first, then capacity_unavailable, with nothing reserved', async () => {
    const { caller: c, avatarId } = await caller(noLiveKit);
    await expectApiError(noLiveKit.services.liveCalls.mint(c, input(avatarId, 'primary')), 'capacity_unavailable', 503);
    await noLiveKit.services.tenants.setLimits(c.tenantId, { maxConcurrentSessions: 0 });
    await expectApiError(
      noLiveKit.services.liveCalls.mint(c, input(avatarId, 'primary')),
      'concurrency_limit_reached',
      429,
    );
    expect(await noLiveKit.services.ledger.balance(c.tenantId)).toMatchObject({ reservedCreditMicros: 0 });
  });

  it('happy: provider mode joins the named room for the named agent, with no user and no room of ours', async () => {
    const name = await pool(1);
    const { caller: c, avatarId } = await caller();
    const room = { name: `provider-${randomBase62(8)}`, agentIdentity: 'their-agent' };
    const { grant } = await t.services.liveCalls.mint(c, input(avatarId, name, { room }));
    expect(grant).toMatchObject({
      roomName: room.name,
      participantToken: null,
      participantIdentity: null,
      avatarIdentity: `avatar-${grant.sessionId}`,
    });
    const [row] = await t.services.sql<{ mode: string; agent_identity: string; user_identity: string | null }[]>`
      select mode, agent_identity, user_identity from live_sessions where id = ${grant.sessionId}`;
    expect(row).toEqual({ mode: 'provider', agent_identity: 'their-agent', user_identity: null });
    await t.services.liveCalls.release(c, { sessionId: grant.sessionId });
  });
});
