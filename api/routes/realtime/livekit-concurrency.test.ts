import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MICROS_PER_SECOND } from '../../../core/credits/ledger.ts';
import { connect } from '../../../core/platform/db/client.ts';
import { LiveSessionStore } from '../../../core/live/sessions.ts';
import { SLOT_RECONCILE_GRACE_MS } from '../../../core/live/capacity.ts';
import { json, testApi, waitFor, type TestApi } from '../../../test/helpers.ts';
import { checkLedgerInvariants } from '../../../test/ledger-invariants.ts';
import { liveKitEnv } from '../../../test/livekit.ts';
import { runJanitorOnce } from '../../janitor.ts';
import { MINT, readyAvatar, RELEASE, setSlots, type GrantBody, type QueueBody } from './test-support.ts';

/**
 * Two API processes (two apps, each with its own database pool and its own LISTEN connection) on
 * one database and one Redis, minting against one pool of N slots on the real LiveKit server.
 */
const env: Record<string, string> = { ...liveKitEnv(), RATE_LIMIT_POINTS: '100000' };
const one = await testApi({ redis: true, env });
const secondPool = connect(one.services.dbUrl, 10);
const two = await testApi({ redis: true, env, database: { url: one.services.dbUrl, sql: secondPool } });
/** The agent worker's process: its own pool, ending calls through LiveSessionStore as agent/worker.ts does. */
const workerPool = connect(one.services.dbUrl, 2);
const worker = new LiveSessionStore(workerPool, one.services.usage);
const SLOTS = 3;

beforeAll(() => setSlots(one, 'primary', SLOTS));
afterAll(async () => {
  await two.close();
  await secondPool.end();
  await workerPool.end();
  await one.close();
});

const apps = [one, two];
const holders = async () => (await one.services.capacity.coordinator.holders('primary')).map((h) => h.holder).sort();

interface Caller {
  tenantId: string;
  apiKeyId: string;
  apiKey: string;
  avatarId: string;
}

async function callers(n: number): Promise<Caller[]> {
  const out = [];
  for (let i = 0; i < n; i++) {
    const w = await one.newTenant({ credits: 100_000 });
    await one.services.tenants.setLimits(w.tenantId, { maxConcurrentSessions: 50 });
    out.push({ ...w, avatarId: await readyAvatar(one, w.tenantId) });
  }
  return out;
}

type Minted = { status: 200; grant: GrantBody } | { status: 429; queue: QueueBody };

async function mint(app: TestApi, c: Caller, ticket?: string): Promise<Minted> {
  const res = await app.request('POST', MINT, {
    key: c.apiKey,
    body: { avatar_id: c.avatarId, max_duration_seconds: 120, ...(ticket ? { queue_ticket_id: ticket } : {}) },
  });
  if (res.status === 200) return { status: 200, grant: await json<GrantBody>(res) };
  expect(res.status, await res.clone().text()).toBe(429);
  return { status: 429, queue: await json<QueueBody>(res) };
}

const release = (app: TestApi, c: Caller, sessionId: string) =>
  app.request('POST', RELEASE, { key: c.apiKey, body: { session_id: sessionId } });

describe('capacity across two API processes sharing Redis', () => {
  it('happy: concurrent mints grant exactly N and queue the rest in arrival order; each freed slot goes to the head of the queue', async () => {
    const cs = await callers(4);
    const requests = Array.from({ length: 12 }, (_, i) => ({ app: apps[i % 2]!, caller: cs[i % cs.length]! }));
    const results = await Promise.all(requests.map((r) => mint(r.app, r.caller)));
    const granted = results.flatMap((r, i) => (r.status === 200 ? [{ ...requests[i]!, grant: r.grant }] : []));
    const queued = results.flatMap((r, i) => (r.status === 429 ? [{ ...requests[i]!, queue: r.queue }] : []));
    expect(granted).toHaveLength(SLOTS);
    expect(queued.map((q) => q.queue.queue_size).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 12 - SLOTS }, (_, i) => i + 1),
    );
    expect(new Set(queued.map((q) => q.queue.queue_ticket_id)).size).toBe(queued.length);
    expect(await holders()).toEqual(granted.map((g) => g.grant.session_id).sort());
    // A newcomer joins at the tail, behind every ticket.
    const late = await mint(two, cs[0]!);
    expect(late).toMatchObject({ status: 429, queue: { queue_size: queued.length + 1 } });
    if (late.status === 429) queued.push({ app: two, caller: cs[0]!, queue: late.queue });

    // Each release frees one slot; every ticket then comes back, last in line first: only the head is admitted.
    const inLine = [...queued].sort((a, b) => a.queue.queue_size - b.queue.queue_size);
    const running = [...granted];
    const admittedInOrder: number[] = [];
    while (inLine.length > 0) {
      const done = running.shift()!;
      expect((await release(done.app === one ? two : one, done.caller, done.grant.session_id)).status).toBe(200);
      let admitted: (typeof inLine)[number] | undefined;
      for (const q of [...inLine].reverse()) {
        const again = await mint(q.app === one ? two : one, q.caller, q.queue.queue_ticket_id);
        if (again.status === 200) {
          expect(admitted, 'one free slot, one admission').toBeUndefined();
          admitted = q;
          running.push({ ...q, grant: again.grant });
        } else {
          expect(again.queue.queue_ticket_id).toBe(q.queue.queue_ticket_id);
        }
      }
      expect(admitted, 'the head of the queue takes the freed slot').toBe(inLine[0]);
      admittedInOrder.push(inLine.shift()!.queue.queue_size);
      const snapshot = await one.services.capacity.snapshot('primary');
      expect(snapshot).toMatchObject({ inUse: SLOTS, queueSize: inLine.length });
    }
    expect(admittedInOrder).toEqual([...admittedInOrder].sort((a, b) => a - b));
    expect(await holders()).toEqual(running.map((r) => r.grant.session_id).sort());

    for (const r of running) expect((await release(r.app, r.caller, r.grant.session_id)).status).toBe(200);
    expect(await one.services.capacity.snapshot('primary')).toMatchObject({ inUse: 0, queueSize: 0 });
    // Every call ended settled (none started: failed, 0), and the ledgers hold.
    const rows = await one.services.sql<{ status: string; billed: number }[]>`
      select status, billed_credit_micros as billed from session_usage where tenant_id = any(${cs.map((c) => c.tenantId)})`;
    expect(rows.length).toBe(SLOTS + queued.length);
    expect(rows.every((r) => r.status === 'failed' && r.billed === 0)).toBe(true);
    await checkLedgerInvariants(
      one.services.sql,
      cs.map((c) => c.tenantId),
      cs.map((c) => c.apiKeyId),
    );
  });

  it('happy: more concurrent mints of distinct workspaces than one process has database connections all complete', async () => {
    // Each mint holds a connection for its transaction; anything else it reads meanwhile must use that one.
    const cs = await callers(14);
    await setSlots(one, 'primary', 20);
    try {
      const results = await Promise.all(cs.map((c) => mint(one, c)));
      expect(results.every((r) => r.status === 200)).toBe(true);
      for (const [i, r] of results.entries()) if (r.status === 200) await release(one, cs[i]!, r.grant.session_id);
    } finally {
      await setSlots(one, 'primary', SLOTS);
    }
  });

  it('happy: mint, database and slot stay consistent under a concurrent burst of mints and releases from both processes', async () => {
    const cs = await callers(3);
    const burst = await Promise.all(Array.from({ length: 9 }, (_, i) => mint(apps[i % 2]!, cs[i % 3]!)));
    const grants = burst.flatMap((r, i) => (r.status === 200 ? [{ caller: cs[i % 3]!, grant: r.grant }] : []));
    // Releases and new mints at once.
    const [, more] = await Promise.all([
      Promise.all(grants.map((g, i) => release(apps[i % 2]!, g.caller, g.grant.session_id))),
      Promise.all(cs.map((c, i) => mint(apps[i % 2]!, c))),
    ]);
    const live = await one.services.sql<{ id: string; tenant_id: string }[]>`
      select id, tenant_id from live_sessions where tenant_id = any(${cs.map((c) => c.tenantId)}) and state <> 'ended'`;
    expect(await holders()).toEqual(live.map((r) => r.id).sort());
    expect(live.length).toBeLessThanOrEqual(SLOTS);
    for (const r of live)
      await release(
        one,
        cs.find((x) => x.tenantId === r.tenant_id)!,
        r.id,
      );
    await checkLedgerInvariants(
      one.services.sql,
      cs.map((c) => c.tenantId),
      cs.map((c) => c.apiKeyId),
    );
    // Leave the queue empty for the next test: tickets of this burst are dropped.
    for (const r of [...burst, ...more])
      if (r.status === 429)
        await one.services.capacity.leaveQueue((await one.services.capacity.ticket(r.queue.queue_ticket_id))!);
    expect(await one.services.capacity.snapshot('primary')).toMatchObject({ inUse: 0, queueSize: 0 });
  });

  it("happy: no slot leaks: a call ended by the worker's process frees its slot through the notify; a lost notify is healed by the janitor", async () => {
    const [c] = await callers(1);
    const a = await mint(one, c!);
    const b = await mint(two, c!);
    if (a.status !== 200 || b.status !== 200) throw new Error('expected two grants');
    // The worker (another process) ends the call: both API processes hear it; the slot is freed.
    await worker.claim(a.grant.session_id, 'wrk_1');
    await worker.joined(a.grant.session_id);
    // Started long before (a late end): the charge stops at the reservation (120 s).
    await worker.started(a.grant.session_id, new Date(Date.now() - 500_000));
    await worker.end(a.grant.session_id, 'user_left');
    await waitFor('the notify to free the slot', async () =>
      (await holders()).includes(a.grant.session_id) ? undefined : true,
    );
    expect(await one.services.usage.get(c!.tenantId, a.grant.session_id)).toMatchObject({
      status: 'released',
      billedCreditMicros: 120 * MICROS_PER_SECOND,
    });

    // No process listens (a notify lost in a reconnect): the slot stays held until the janitor reconciles.
    await Promise.all(apps.map((app) => app.services.capacity.close()));
    try {
      await worker.end(b.grant.session_id, 'failed');
      expect(await holders()).toContain(b.grant.session_id);
      expect((await runJanitorOnce(one.services)).slotsFreed).toBe(0);
      // Past the grace of a fresh grant (moved back rather than waited for).
      await one.services.redis!.zadd(
        `${env.REDIS_KEY_PREFIX!}cap:{primary}:holders`,
        Date.now() - SLOT_RECONCILE_GRACE_MS - 1000,
        b.grant.session_id,
      );
      expect((await runJanitorOnce(two.services)).slotsFreed).toBe(1);
      expect(await holders()).not.toContain(b.grant.session_id);
    } finally {
      await Promise.all(apps.map((app) => app.services.capacity.listen()));
    }
    await checkLedgerInvariants(one.services.sql, [c!.tenantId], [c!.apiKeyId]);
  });
});
