/**
 * Agent workers declare what they serve: a capacity pool and a number of call slots, refreshed
 * while they live. A pool with no operator-configured slot count admits as many calls as its
 * live workers declare (those seen within WORKER_TTL_SECONDS, not draining).
 */
import type { Sql } from '../platform/db/index.ts';

/** A worker not heard from this long no longer counts toward its pool's slots. */
const WORKER_TTL_SECONDS = 30;

export interface WorkerDeclaration {
  id: string;
  capacityPool: string;
  slots: number;
  hostname?: string;
}

export class AgentWorkerRegistry {
  constructor(private readonly sql: Sql) {}

  /** Declares (or re-declares) a worker; also its heartbeat. */
  async declare(w: WorkerDeclaration): Promise<void> {
    await this.sql`
      insert into agent_workers (id, capacity_pool, slots, hostname)
      values (${w.id}, ${w.capacityPool}, ${w.slots}, ${w.hostname ?? null})
      on conflict (id) do update set capacity_pool = excluded.capacity_pool, slots = excluded.slots, last_seen_at = now()`;
  }

  /** The worker takes no new calls (it is shutting down): its slots stop counting. */
  async drain(id: string): Promise<void> {
    await this.sql`update agent_workers set draining = true, last_seen_at = now() where id = ${id}`;
  }

  async remove(id: string): Promise<void> {
    await this.sql`delete from agent_workers where id = ${id}`;
  }

  /** Slots declared by the live, non-draining workers of each pool. */
  async declaredSlots(): Promise<Map<string, number>> {
    return new Map([...(await this.livePools())].map(([pool, p]) => [pool, p.slots]));
  }

  /** The live, non-draining workers of each pool: how many, and the slots they declare together. */
  async livePools(): Promise<Map<string, { workers: number; slots: number }>> {
    const rows = await this.sql<{ capacity_pool: string; workers: number; slots: number }[]>`
      select capacity_pool, count(*)::int as workers, sum(slots)::int as slots from agent_workers
      where not draining and last_seen_at > now() - make_interval(secs => ${WORKER_TTL_SECONDS})
      group by capacity_pool`;
    return new Map(rows.map((r) => [r.capacity_pool, { workers: r.workers, slots: r.slots }]));
  }
}
