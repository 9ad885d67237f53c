/**
 * The platform's gauges read from the database and the capacity coordinator at scrape time: live
 * calls by state, the capacity queue by pool, credits held by open reservations, background jobs by
 * queue and state. They are deployment-wide (every API process answers the same), so a dashboard
 * takes their max() across processes, not their sum.
 */
import { jobCounts } from '../platform/jobs/index.ts';
import { collectedGauge, type Registry } from '../platform/metrics.ts';
import type { Services } from './services.ts';

const LIVE_STATES = ['pending', 'connecting', 'active'] as const;

/** Registers the gauges on `registry` (idempotent: a second call finds them registered). */
export function registerPlatformGauges(registry: Registry, services: Pick<Services, 'sql' | 'capacity' | 'log'>): void {
  const { sql, capacity, log } = services;
  collectedGauge(registry, {
    name: 'avatar_live_sessions',
    help: 'Live calls not yet ended, by state (pending: minted, connecting: the avatar joined, active: the user too)',
    labelNames: ['state'],
    log,
    read: async () => {
      const rows = await sql<{ state: string; count: number }[]>`
        select state, count(*)::int as count from live_sessions where state <> 'ended' group by state`;
      const by = new Map(rows.map((r) => [r.state, r.count]));
      return LIVE_STATES.map((state) => ({ labels: { state }, value: by.get(state) ?? 0 }));
    },
  });
  collectedGauge(registry, {
    name: 'avatar_capacity_queue_size',
    help: 'Mints waiting in the live-call capacity queue (429 with a queue ticket), by capacity pool',
    labelNames: ['pool'],
    log,
    read: async () => {
      const pools = [...(await capacity.pools()).keys()];
      const usage = await Promise.all(pools.map((pool) => capacity.coordinator.usage(pool)));
      return pools.map((pool, i) => ({ labels: { pool }, value: usage[i]!.queueSize }));
    },
  });
  collectedGauge(registry, {
    name: 'avatar_credits_reserved_micros',
    help: 'Credit micros held by open reservations (live calls, turns, renders in progress), all workspaces together',
    labelNames: [],
    log,
    read: async () => {
      const [row] = await sql<{ micros: string }[]>`
        select coalesce(sum(amount_credit_micros), 0)::text as micros from credit_reservations where status = 'open'`;
      return [{ labels: {}, value: Number(row?.micros ?? 0) }];
    },
  });
  collectedGauge(registry, {
    name: 'avatar_jobs',
    help: 'Background jobs (avatar loops, clips, scenes, video caches, sweeps) by queue and state: created, retry, active, failed',
    labelNames: ['queue', 'state'],
    log,
    read: async () =>
      (await jobCounts(sql)).map((r) => ({ labels: { queue: r.queue, state: r.state }, value: r.count })),
  });
}
