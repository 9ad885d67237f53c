/**
 * Capacity of live calls: how many calls each pool takes (its slots), who holds them, and the queue
 * of mints waiting for one. The slot count of a pool is the operator's (`capacity_pools.slots`,
 * `npm run admin -- pool set`) when set, else the sum its live agent workers declare. The slots
 * themselves live in the coordinator (core/platform/coord/capacity.ts: Redis across processes, or in-process).
 *
 * A slot is freed when its call ends, whoever ends it: the end NOTIFYs every API process
 * (`live_session_ended`, from a trigger on live_sessions), each of which releases it; and
 * `reconcile` (the janitor) frees any slot whose session is ended or missing, so a lost notify or a
 * process killed between taking a slot and recording its session leaks nothing.
 */
import type { CapacityCoordinator, PoolUsage, TicketRecord } from '../platform/coord/capacity.ts';
import type { Sql } from '../platform/db/index.ts';
import type { Logger } from '../platform/log.ts';
import type { AgentWorkerRegistry } from './workers.ts';

/** The pool a mint asks for when it names none. */
export const DEFAULT_POOL = 'primary';
/** A pool name (also checked by the database). */
export const POOL_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** A slot is only reconciled away this long after it was granted: its session row may still be on its way. */
export const SLOT_RECONCILE_GRACE_MS = 30_000;

export interface PoolSlots {
  slots: number;
  /** True when the operator set the count; false when it is what the workers declare. */
  configured: boolean;
  /** Live, non-draining agent workers of the pool. */
  workers: number;
}

export type CapacityDecision =
  | { status: 'granted'; pool: string }
  | { status: 'queued'; pool: string; ticketId: string; position: number }
  /** No pool has any slot (no worker, nothing configured): queueing would never end. */
  | { status: 'unavailable' };

export interface PoolSnapshot extends PoolUsage, PoolSlots {
  pool: string;
}

export class LiveCapacity {
  private unlisten?: () => Promise<void>;

  constructor(
    private readonly sql: Sql,
    readonly coordinator: CapacityCoordinator,
    private readonly workers: AgentWorkerRegistry,
    private readonly log: Logger,
  ) {}

  /** Every pool with a slot count: configured ones, and the ones live workers declare. */
  async pools(): Promise<Map<string, PoolSlots>> {
    const [configured, declared] = await Promise.all([
      this.sql<{ name: string; slots: number }[]>`select name, slots from capacity_pools`,
      this.workers.livePools(),
    ]);
    const out = new Map<string, PoolSlots>();
    for (const [name, d] of declared) out.set(name, { slots: d.slots, configured: false, workers: d.workers });
    for (const c of configured)
      out.set(c.name, { slots: c.slots, configured: true, workers: declared.get(c.name)?.workers ?? 0 });
    return out;
  }

  /**
   * Takes a slot for `holder` in the asked pool, or in another pool with room when the asked one is
   * full (failover); otherwise queues in the asked pool (a ticket sent back keeps its place).
   * `pools` is a `pools()` read by the caller: a mint reads it before its transaction, so that it
   * never needs a second database connection while holding one.
   */
  async acquire(
    req: { pool: string; holder: string; tenantId: string; ticketId?: string },
    pools: Map<string, PoolSlots>,
  ): Promise<CapacityDecision> {
    const asked = pools.get(req.pool)?.slots ?? 0;
    const others = [...pools]
      .filter(([name, p]) => name !== req.pool && p.slots > 0)
      .sort(([a], [b]) => a.localeCompare(b));
    if (asked <= 0 && others.length === 0) return { status: 'unavailable' };
    const base = { holder: req.holder, tenantId: req.tenantId };

    // The asked pool first, keeping a returning ticket's place (no new ticket yet).
    const first = await this.coordinator.acquire({
      ...base,
      pool: req.pool,
      slots: asked,
      ticketId: req.ticketId,
      enqueue: false,
    });
    if (first.status === 'granted') return { status: 'granted', pool: req.pool };
    // Failover: another pool with room (free slots beyond its own queue).
    for (const [name, p] of others) {
      const r = await this.coordinator.acquire({ ...base, pool: name, slots: p.slots, enqueue: false });
      if (r.status !== 'granted') continue;
      if (first.status === 'queued')
        await this.coordinator.leaveQueue({ ticketId: first.ticketId, pool: req.pool, tenantId: req.tenantId });
      return { status: 'granted', pool: name };
    }
    if (first.status === 'queued')
      return { status: 'queued', pool: req.pool, ticketId: first.ticketId, position: first.position };
    // Queue at the tail of the asked pool (granted after all if a slot freed meanwhile).
    const last = await this.coordinator.acquire({ ...base, pool: req.pool, slots: asked, enqueue: true });
    if (last.status === 'granted') return { status: 'granted', pool: req.pool };
    if (last.status === 'queued')
      return { status: 'queued', pool: req.pool, ticketId: last.ticketId, position: last.position };
    throw new Error('A queueing acquire answered full');
  }

  release(pool: string, holder: string): Promise<boolean> {
    return this.coordinator.release(pool, holder);
  }

  ticket(ticketId: string): Promise<TicketRecord | undefined> {
    return this.coordinator.ticket(ticketId);
  }

  leaveQueue(ticket: TicketRecord): Promise<void> {
    return this.coordinator.leaveQueue(ticket);
  }

  async snapshot(pool: string): Promise<PoolSnapshot> {
    const [pools, usage] = await Promise.all([this.pools(), this.coordinator.usage(pool)]);
    return { pool, ...(pools.get(pool) ?? { slots: 0, configured: false, workers: 0 }), ...usage };
  }

  /** Sets (or, with null, removes) the operator's slot count of a pool. */
  async setPoolSlots(pool: string, slots: number | null): Promise<void> {
    if (slots === null) await this.sql`delete from capacity_pools where name = ${pool}`;
    else {
      await this.sql`insert into capacity_pools (name, slots) values (${pool}, ${slots})
                     on conflict (name) do update set slots = excluded.slots, updated_at = now()`;
    }
  }

  /** Frees a call's slot when it ends, whichever process ended it (every API process listens). */
  async listen(): Promise<void> {
    const sub = await this.sql.listen('live_session_ended', (payload) => {
      const at = payload.indexOf(':');
      if (at <= 0) return;
      const pool = payload.slice(0, at);
      const sessionId = payload.slice(at + 1);
      this.release(pool, sessionId).catch((err: unknown) =>
        this.log.warn({ err, sessionId }, 'could not free the slot of an ended call'),
      );
    });
    this.unlisten = () => sub.unlisten();
  }

  async close(): Promise<void> {
    await this.unlisten?.();
    this.unlisten = undefined;
  }

  /**
   * Frees the slots whose session is ended or missing (granted more than `graceMs` ago), and drops
   * queue tickets not sent back in time. Answers how many slots it freed.
   */
  async reconcile(graceMs = SLOT_RECONCILE_GRACE_MS, now = Date.now()): Promise<number> {
    let freed = 0;
    for (const pool of await this.coordinator.pools()) {
      const old = (await this.coordinator.holders(pool))
        .filter((h) => now - h.grantedAt > graceMs)
        .map((h) => h.holder);
      if (old.length === 0) continue;
      const live = new Set(
        (
          await this.sql<{ id: string }[]>`select id from live_sessions where id = any(${old}) and state <> 'ended'`
        ).map((r) => r.id),
      );
      for (const holder of old) {
        if (live.has(holder)) continue;
        if (await this.release(pool, holder)) {
          freed++;
          this.log.info({ pool, sessionId: holder }, 'freed the slot of a call that had ended');
        }
      }
    }
    await this.coordinator.expireTickets();
    return freed;
  }
}
