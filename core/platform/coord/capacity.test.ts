import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newId } from '../ids.ts';
import { redisConnections } from '../../../test/helpers.ts';
import {
  memoryCapacity,
  redisCapacity,
  type AcquireResult,
  type CapacityCoordinator,
  type CapacityOptions,
} from './capacity.ts';

/** One contract, two implementations: the same suite runs against the in-process and the Redis coordinator. */
const redisConnection = redisConnections();
const processes = [redisConnection(), redisConnection()];

const TTL = 30_000;
const ticketIds = () => newId('queueTicket');

/** A clock the test moves (ticket expiry without waiting). */
function manualClock(start = 1_700_000_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

interface Flavour {
  name: string;
  /** Coordinators sharing one state (two API processes); each call of `make` is a fresh state. */
  make(o: Omit<CapacityOptions, 'prefix'>): () => CapacityCoordinator;
}

const flavours: Flavour[] = [
  {
    name: 'in-process',
    make: (o) => {
      const one = memoryCapacity(o, ticketIds);
      return () => one;
    },
  },
  {
    name: 'Redis',
    make: (o) => {
      const prefix = `cap-test-${randomUUID()}:`;
      let next = 0;
      // Each coordinator on a connection of its own, as two API processes would be.
      return () => redisCapacity(processes[next++ % processes.length]!, { ...o, prefix }, ticketIds);
    },
  },
];

const T = 'ten_a';
const granted = (r: AcquireResult) => r.status === 'granted';

describe.each(flavours)('capacity coordinator contract: $name', ({ make }) => {
  it('grants up to the slot count, then queues with 1-based positions in arrival order', async () => {
    const c = make({ ticketTtlMs: TTL })();
    const results: AcquireResult[] = [];
    for (let i = 0; i < 5; i++)
      results.push(await c.acquire({ pool: 'p', slots: 2, holder: `ses_${i}`, tenantId: T, enqueue: true }));
    expect(results.slice(0, 2)).toEqual([{ status: 'granted' }, { status: 'granted' }]);
    expect(results.slice(2).map((r) => (r.status === 'queued' ? r.position : -1))).toEqual([1, 2, 3]);
    expect(await c.usage('p')).toEqual({ inUse: 2, queueSize: 3 });
  });

  it('a probe (enqueue false) answers full without queueing', async () => {
    const c = make({ ticketTtlMs: TTL })();
    await c.acquire({ pool: 'p', slots: 1, holder: 'ses_1', tenantId: T, enqueue: true });
    expect(await c.acquire({ pool: 'p', slots: 1, holder: 'ses_2', tenantId: T, enqueue: false })).toEqual({
      status: 'full',
      queueSize: 0,
    });
    expect(await c.usage('p')).toEqual({ inUse: 1, queueSize: 0 });
  });

  it('a ticket sent back keeps its place; the head takes the next free slot, the others hear their position again', async () => {
    const c = make({ ticketTtlMs: TTL })();
    await c.acquire({ pool: 'p', slots: 1, holder: 'ses_0', tenantId: T, enqueue: true });
    const a = await c.acquire({ pool: 'p', slots: 1, holder: 'ses_a', tenantId: T, enqueue: true });
    const b = await c.acquire({ pool: 'p', slots: 1, holder: 'ses_b', tenantId: T, enqueue: true });
    if (a.status !== 'queued' || b.status !== 'queued') throw new Error('expected both queued');
    // Still full: each keeps its place.
    expect(
      await c.acquire({ pool: 'p', slots: 1, holder: 'ses_b2', tenantId: T, ticketId: b.ticketId, enqueue: true }),
    ).toMatchObject({ status: 'queued', ticketId: b.ticketId, position: 2 });
    expect(await c.release('p', 'ses_0')).toBe(true);
    // A newcomer and the second in line do not jump the head.
    expect(await c.acquire({ pool: 'p', slots: 1, holder: 'ses_new', tenantId: T, enqueue: false })).toEqual({
      status: 'full',
      queueSize: 2,
    });
    expect(
      await c.acquire({ pool: 'p', slots: 1, holder: 'ses_b3', tenantId: T, ticketId: b.ticketId, enqueue: true }),
    ).toMatchObject({ status: 'queued', position: 2 });
    expect(
      await c.acquire({ pool: 'p', slots: 1, holder: 'ses_a2', tenantId: T, ticketId: a.ticketId, enqueue: true }),
    ).toEqual({ status: 'granted' });
    expect(
      await c.acquire({ pool: 'p', slots: 1, holder: 'ses_b4', tenantId: T, ticketId: b.ticketId, enqueue: true }),
    ).toMatchObject({ status: 'queued', position: 1 });
    expect(await c.holders('p')).toEqual([expect.objectContaining({ holder: 'ses_a2' })]);
  });

  it('admits the ticket at rank p when p < free slots (several free at once)', async () => {
    const c = make({ ticketTtlMs: TTL })();
    for (let i = 0; i < 3; i++) await c.acquire({ pool: 'p', slots: 3, holder: `h${i}`, tenantId: T, enqueue: true });
    const q = [];
    for (let i = 0; i < 3; i++)
      q.push(await c.acquire({ pool: 'p', slots: 3, holder: `w${i}`, tenantId: T, enqueue: true }));
    const tickets = q.map((r) => (r.status === 'queued' ? r.ticketId : ''));
    await c.release('p', 'h0');
    await c.release('p', 'h1');
    // Two free: ranks 0 and 1 are admitted, rank 2 is not, whatever the order they come back in.
    expect(
      await c.acquire({ pool: 'p', slots: 3, holder: 'w1', tenantId: T, ticketId: tickets[1], enqueue: true }),
    ).toEqual({ status: 'granted' });
    expect(
      await c.acquire({ pool: 'p', slots: 3, holder: 'w2', tenantId: T, ticketId: tickets[2], enqueue: true }),
    ).toMatchObject({ status: 'queued', position: 2 });
    expect(
      await c.acquire({ pool: 'p', slots: 3, holder: 'w0', tenantId: T, ticketId: tickets[0], enqueue: true }),
    ).toEqual({ status: 'granted' });
    expect(
      await c.acquire({ pool: 'p', slots: 3, holder: 'w2', tenantId: T, ticketId: tickets[2], enqueue: true }),
    ).toMatchObject({ status: 'queued', position: 1 });
  });

  it('a ticket not sent back within the ttl leaves the queue; a late one queues again at the tail', async () => {
    const clock = manualClock();
    const c = make({ ticketTtlMs: TTL, clock: clock.now })();
    await c.acquire({ pool: 'p', slots: 1, holder: 'h', tenantId: T, enqueue: true });
    const stale = await c.acquire({ pool: 'p', slots: 1, holder: 's', tenantId: T, enqueue: true });
    clock.advance(TTL / 2);
    const fresh = await c.acquire({ pool: 'p', slots: 1, holder: 'f', tenantId: T, enqueue: true });
    expect(fresh).toMatchObject({ position: 2 });
    clock.advance(TTL / 2);
    // The first ticket was not sent back within the ttl: gone; the second moves up.
    expect(await c.usage('p')).toEqual({ inUse: 1, queueSize: 1 });
    if (stale.status !== 'queued' || fresh.status !== 'queued') throw new Error('expected queued');
    expect(
      await c.acquire({ pool: 'p', slots: 1, holder: 'f', tenantId: T, ticketId: fresh.ticketId, enqueue: true }),
    ).toMatchObject({ position: 1 });
    const late = await c.acquire({
      pool: 'p',
      slots: 1,
      holder: 's',
      tenantId: T,
      ticketId: stale.ticketId,
      enqueue: true,
    });
    expect(late).toMatchObject({ status: 'queued', position: 2 });
    expect(late.status === 'queued' && late.ticketId).not.toBe(stale.ticketId);
    clock.advance(TTL);
    expect(await c.expireTickets()).toBe(2);
    expect(await c.usage('p')).toEqual({ inUse: 1, queueSize: 0 });
  });

  it("another tenant's ticket, or a ticket of another pool, counts as no ticket", async () => {
    const c = make({ ticketTtlMs: TTL })();
    await c.acquire({ pool: 'p', slots: 1, holder: 'h', tenantId: T, enqueue: true });
    await c.acquire({ pool: 'q', slots: 0, holder: 'x', tenantId: T, enqueue: true });
    const mine = await c.acquire({ pool: 'p', slots: 1, holder: 'm', tenantId: T, enqueue: true });
    if (mine.status !== 'queued') throw new Error('expected queued');
    const theirs = await c.acquire({
      pool: 'p',
      slots: 1,
      holder: 'o',
      tenantId: 'ten_b',
      ticketId: mine.ticketId,
      enqueue: true,
    });
    expect(theirs).toMatchObject({ status: 'queued', position: 2 });
    expect(theirs.status === 'queued' && theirs.ticketId).not.toBe(mine.ticketId);
    expect(
      await c.acquire({ pool: 'q', slots: 0, holder: 'm', tenantId: T, ticketId: mine.ticketId, enqueue: true }),
    ).toMatchObject({ status: 'queued', position: 2 });
    expect(await c.ticket(mine.ticketId)).toEqual({ ticketId: mine.ticketId, pool: 'p', tenantId: T });
  });

  it('leaving the queue is idempotent and lets the next one move up; release is idempotent', async () => {
    const c = make({ ticketTtlMs: TTL })();
    await c.acquire({ pool: 'p', slots: 1, holder: 'h', tenantId: T, enqueue: true });
    const a = await c.acquire({ pool: 'p', slots: 1, holder: 'a', tenantId: T, enqueue: true });
    const b = await c.acquire({ pool: 'p', slots: 1, holder: 'b', tenantId: T, enqueue: true });
    if (a.status !== 'queued' || b.status !== 'queued') throw new Error('expected queued');
    const rec = (await c.ticket(a.ticketId))!;
    await c.leaveQueue(rec);
    await c.leaveQueue(rec);
    expect(
      await c.acquire({ pool: 'p', slots: 1, holder: 'b', tenantId: T, ticketId: b.ticketId, enqueue: true }),
    ).toMatchObject({ position: 1 });
    expect(await c.release('p', 'h')).toBe(true);
    expect(await c.release('p', 'h')).toBe(false);
    expect(await c.ticket('qtk_unknown')).toBeUndefined();
  });

  it('a holder acquiring again is granted without taking a second slot; a shrunk pool admits nobody until enough are released', async () => {
    const c = make({ ticketTtlMs: TTL })();
    await c.acquire({ pool: 'p', slots: 2, holder: 'h1', tenantId: T, enqueue: true });
    await c.acquire({ pool: 'p', slots: 2, holder: 'h2', tenantId: T, enqueue: true });
    expect(await c.acquire({ pool: 'p', slots: 2, holder: 'h1', tenantId: T, enqueue: true })).toEqual({
      status: 'granted',
    });
    expect((await c.usage('p')).inUse).toBe(2);
    await c.release('p', 'h1');
    expect(await c.acquire({ pool: 'p', slots: 0, holder: 'n', tenantId: T, enqueue: false })).toEqual({
      status: 'full',
      queueSize: 0,
    });
    expect(await c.pools()).toEqual(['p']);
  });

  it('concurrent acquires from two processes grant exactly N, queue the rest, and never leak a slot (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 6 }),
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.boolean(), { maxLength: 20 }),
        async (slots, n, releases) => {
          const shared = make({ ticketTtlMs: TTL });
          const [one, two] = [shared(), shared()];
          const results = await Promise.all(
            Array.from({ length: n }, (_, i) =>
              (i % 2 ? one : two).acquire({ pool: 'p', slots, holder: `ses_${i}`, tenantId: T, enqueue: true }),
            ),
          );
          const grantedIds = results.flatMap((r, i) => (granted(r) ? [`ses_${i}`] : []));
          expect(grantedIds).toHaveLength(Math.min(slots, n));
          const queued = results.filter((r) => r.status === 'queued');
          expect(queued.map((r) => (r.status === 'queued' ? r.position : 0)).sort((a, b) => a - b)).toEqual(
            queued.map((_, i) => i + 1),
          );
          // Release some holders, then every ticket comes back in queue order: each free slot goes to the head.
          let freed = 0;
          for (const [i, id] of grantedIds.entries()) {
            if (releases[i]) {
              expect(await one.release('p', id)).toBe(true);
              freed++;
            }
          }
          const byPosition = [...queued].sort((a, b) =>
            a.status === 'queued' && b.status === 'queued' ? a.position - b.position : 0,
          );
          let admitted = 0;
          for (const q of byPosition) {
            if (q.status !== 'queued') continue;
            const again = await two.acquire({
              pool: 'p',
              slots,
              holder: `t_${q.ticketId}`,
              tenantId: T,
              ticketId: q.ticketId,
              enqueue: true,
            });
            if (granted(again)) admitted++;
          }
          expect(admitted).toBe(Math.min(freed, queued.length));
          expect(await one.usage('p')).toEqual({
            inUse: Math.min(slots, n) - freed + admitted,
            queueSize: queued.length - admitted,
          });
        },
      ),
      { numRuns: 25 },
    );
  });
});
