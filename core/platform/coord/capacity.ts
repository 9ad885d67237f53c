import type { Redis } from 'ioredis';

/**
 * Capacity slots and their queue, per pool, shared by every API process: the live-call mint takes a
 * slot for a session (the holder) or queues behind the others with a ticket. Two implementations
 * of one contract (core/platform/coord/capacity.test.ts runs the same suite against both): Redis (Lua
 * scripts, so each decision is atomic across processes) and in-process (a single API process).
 *
 * The rules:
 * - A pool admits a mint while it has a free slot (`slots` minus holders) and nobody queues ahead:
 *   a ticket at 0-based rank `p` in its pool's queue is admitted when `p < free`; a request without
 *   a (known) ticket joins at the tail, so it is admitted when `queueSize < free`.
 * - Not admitted: it queues (a new ticket at the tail) or, when it sent a ticket, keeps its place.
 *   `position` is 1-based: the number of queued requests up to and including this one.
 * - A ticket not sent back within `ticketTtlMs` leaves the queue (checked on every decision of its
 *   pool, and by `expireTickets`). A ticket belongs to one tenant and one pool; anything else is
 *   treated as no ticket.
 * - The slot count is the caller's (operator-configured or declared by the pool's workers): a pool
 *   shrunk below its holders admits nobody until enough are released.
 */
interface AcquireRequest {
  pool: string;
  /** The pool's slot count now. */
  slots: number;
  /** Who holds the slot once granted (a live session id). Acquiring again as a holder is granted at once. */
  holder: string;
  tenantId: string;
  /** The ticket of an earlier refusal in this pool: keeps its place. */
  ticketId?: string;
  /** Queue when not admitted; false answers `full` without queueing (a failover probe). */
  enqueue: boolean;
}

export type AcquireResult =
  | { status: 'granted' }
  | { status: 'queued'; ticketId: string; position: number; queueSize: number }
  | { status: 'full'; queueSize: number };

export interface TicketRecord {
  ticketId: string;
  pool: string;
  tenantId: string;
}

export interface PoolUsage {
  inUse: number;
  queueSize: number;
}

export interface CapacityCoordinator {
  acquire(req: AcquireRequest): Promise<AcquireResult>;
  /** Frees a holder's slot; false when it held none (idempotent). */
  release(pool: string, holder: string): Promise<boolean>;
  /** What a ticket was issued for; undefined once forgotten (TICKET_RECORD_SECONDS after issue) or never issued. */
  ticket(ticketId: string): Promise<TicketRecord | undefined>;
  /** Takes a ticket out of its queue (idempotent). */
  leaveQueue(ticket: TicketRecord): Promise<void>;
  /** Holders and queue length of a pool (expired tickets dropped first). */
  usage(pool: string): Promise<PoolUsage>;
  /** A pool's holders with the time each was granted (ms since the epoch). */
  holders(pool: string): Promise<{ holder: string; grantedAt: number }[]>;
  /** Every pool that ever took a decision. */
  pools(): Promise<string[]>;
  /** Drops the tickets of every pool not sent back in time; answers how many. */
  expireTickets(): Promise<number>;
}

export interface CapacityOptions {
  /** A ticket not sent back within this long leaves its queue. */
  ticketTtlMs: number;
  /** Milliseconds since the epoch (tests move time instead of waiting for it). */
  clock?: () => number;
  /** Prefix of every key (Redis): several deployments or test files can share one server. */
  prefix?: string;
}

/** How long a ticket's record (its pool and tenant) is kept after issue, so a late leave is answered. */
const TICKET_RECORD_SECONDS = 3600;

/** Where a new ticket's id comes from (the caller's id scheme). */
export type TicketIds = () => string;

// ---------------------------------------------------------------------------------------------
// In-process
// ---------------------------------------------------------------------------------------------

interface MemoryPool {
  holders: Map<string, number>;
  /** Ticket → last time it was sent (insertion order is arrival order). */
  queue: Map<string, number>;
}

/** Single process only: the embedded default. */
export function memoryCapacity(o: CapacityOptions, newTicketId: TicketIds): CapacityCoordinator {
  const clock = o.clock ?? Date.now;
  const pools = new Map<string, MemoryPool>();
  const records = new Map<string, TicketRecord & { until: number }>();
  const poolOf = (name: string): MemoryPool => {
    let p = pools.get(name);
    if (!p) pools.set(name, (p = { holders: new Map(), queue: new Map() }));
    return p;
  };
  const purge = (p: MemoryPool, now: number): number => {
    let n = 0;
    for (const [t, seen] of p.queue) {
      if (seen <= now - o.ticketTtlMs) {
        p.queue.delete(t);
        n++;
      }
    }
    return n;
  };
  const record = (ticketId: string, now: number) => {
    const r = records.get(ticketId);
    if (r && r.until <= now) records.delete(ticketId);
    return r && r.until > now ? r : undefined;
  };

  return {
    async acquire(req) {
      const now = clock();
      const p = poolOf(req.pool);
      purge(p, now);
      if (p.holders.has(req.holder)) return { status: 'granted' };
      const free = req.slots - p.holders.size;
      if (req.ticketId && record(req.ticketId, now)?.tenantId === req.tenantId && p.queue.has(req.ticketId)) {
        const rank = [...p.queue.keys()].indexOf(req.ticketId);
        if (rank < free) {
          p.queue.delete(req.ticketId);
          p.holders.set(req.holder, now);
          return { status: 'granted' };
        }
        p.queue.set(req.ticketId, now);
        return { status: 'queued', ticketId: req.ticketId, position: rank + 1, queueSize: p.queue.size };
      }
      const size = p.queue.size;
      if (size < free) {
        p.holders.set(req.holder, now);
        return { status: 'granted' };
      }
      if (!req.enqueue) return { status: 'full', queueSize: size };
      const ticketId = newTicketId();
      p.queue.set(ticketId, now);
      records.set(ticketId, {
        ticketId,
        pool: req.pool,
        tenantId: req.tenantId,
        until: now + TICKET_RECORD_SECONDS * 1000,
      });
      return { status: 'queued', ticketId, position: size + 1, queueSize: size + 1 };
    },
    async release(pool, holder) {
      return pools.get(pool)?.holders.delete(holder) ?? false;
    },
    async ticket(ticketId) {
      const r = record(ticketId, clock());
      return r && { ticketId: r.ticketId, pool: r.pool, tenantId: r.tenantId };
    },
    async leaveQueue(t) {
      pools.get(t.pool)?.queue.delete(t.ticketId);
    },
    async usage(pool) {
      const p = pools.get(pool);
      if (!p) return { inUse: 0, queueSize: 0 };
      purge(p, clock());
      return { inUse: p.holders.size, queueSize: p.queue.size };
    },
    async holders(pool) {
      return [...(pools.get(pool)?.holders ?? new Map<string, number>())].map(([holder, grantedAt]) => ({
        holder,
        grantedAt,
      }));
    },
    async pools() {
      return [...pools.keys()];
    },
    async expireTickets() {
      const now = clock();
      let n = 0;
      for (const p of pools.values()) n += purge(p, now);
      for (const [id] of records) record(id, now);
      return n;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Redis
// ---------------------------------------------------------------------------------------------

/**
 * Keys: <prefix>cap:pools (set of pool names), and per pool <prefix>cap:{pool}:holders (zset holder
 * → grant time), :queue (zset ticket → arrival sequence), :seen (zset ticket → last time sent);
 * <prefix>cap:seq (arrival counter), <prefix>cap:ticket:<id> (hash pool, tenant; expires).
 */

// Drops a pool's tickets not sent back within the ttl. KEYS: queue, seen. ARGV: now, ttl.
const PURGE = `
local function purge(queue, seen, now, ttl)
  local stale = redis.call('ZRANGEBYSCORE', seen, '-inf', now - ttl)
  for _, t in ipairs(stale) do
    redis.call('ZREM', queue, t)
    redis.call('ZREM', seen, t)
  end
  return #stale
end
`;

// KEYS: holders, queue, seen, seq, pools, record of the ticket sent (or a dummy), record of a new ticket.
// ARGV: pool, holder, slots, now, ttl, ticket ('' for none), enqueue ('1'/'0'), new ticket id, tenant, record ttl (s).
const ACQUIRE = `${PURGE}
local holders, queue, seen = KEYS[1], KEYS[2], KEYS[3]
local pool, holder, slots, now, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local ticket, enqueue, tenant = ARGV[6], ARGV[7] == '1', ARGV[9]
redis.call('SADD', KEYS[5], pool)
purge(queue, seen, now, ttl)
if redis.call('ZSCORE', holders, holder) then return {'granted'} end
local free = slots - redis.call('ZCARD', holders)
if ticket ~= '' and redis.call('HGET', KEYS[6], 'tenant') == tenant then
  local rank = redis.call('ZRANK', queue, ticket)
  if rank then
    if rank < free then
      redis.call('ZREM', queue, ticket)
      redis.call('ZREM', seen, ticket)
      redis.call('ZADD', holders, now, holder)
      return {'granted'}
    end
    redis.call('ZADD', seen, now, ticket)
    return {'queued', ticket, rank + 1, redis.call('ZCARD', queue)}
  end
end
local size = redis.call('ZCARD', queue)
if size < free then
  redis.call('ZADD', holders, now, holder)
  return {'granted'}
end
if not enqueue then return {'full', '', 0, size} end
local fresh = ARGV[8]
redis.call('ZADD', queue, redis.call('INCR', KEYS[4]), fresh)
redis.call('ZADD', seen, now, fresh)
redis.call('HSET', KEYS[7], 'pool', pool, 'tenant', tenant)
redis.call('EXPIRE', KEYS[7], tonumber(ARGV[10]))
return {'queued', fresh, size + 1, size + 1}
`;

// KEYS: holders, queue, seen. ARGV: now, ttl. Answers {holders, queue length, expired}.
const USAGE = `${PURGE}
local expired = purge(KEYS[2], KEYS[3], tonumber(ARGV[1]), tonumber(ARGV[2]))
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), expired}
`;

type Reply = [string, string?, number?, number?];

interface CapacityCommands {
  capacityAcquire(...args: (string | number)[]): Promise<Reply>;
  capacityUsage(...args: (string | number)[]): Promise<[number, number, number]>;
}

/** Shared by every API process on one Redis. */
export function redisCapacity(redis: Redis, o: CapacityOptions, newTicketId: TicketIds): CapacityCoordinator {
  const clock = o.clock ?? Date.now;
  const prefix = `${o.prefix ?? ''}cap:`;
  const commands = redis as unknown as Redis & CapacityCommands;
  // defineCommand runs EVALSHA with an EVAL fallback; once per connection.
  if (typeof commands.capacityAcquire !== 'function') {
    redis.defineCommand('capacityAcquire', { numberOfKeys: 7, lua: ACQUIRE });
    redis.defineCommand('capacityUsage', { numberOfKeys: 3, lua: USAGE });
  }
  const keys = (pool: string) => ({
    holders: `${prefix}{${pool}}:holders`,
    queue: `${prefix}{${pool}}:queue`,
    seen: `${prefix}{${pool}}:seen`,
  });
  const recordKey = (ticketId: string) => `${prefix}ticket:${ticketId}`;
  const poolsKey = `${prefix}pools`;

  const usage = async (pool: string): Promise<PoolUsage & { expired: number }> => {
    const k = keys(pool);
    const [inUse, queueSize, expired] = await commands.capacityUsage(
      k.holders,
      k.queue,
      k.seen,
      clock(),
      o.ticketTtlMs,
    );
    return { inUse, queueSize, expired };
  };

  return {
    async acquire(req) {
      const k = keys(req.pool);
      const fresh = req.enqueue ? newTicketId() : '';
      const sent = req.ticketId ?? '';
      const reply = await commands.capacityAcquire(
        k.holders,
        k.queue,
        k.seen,
        `${prefix}seq`,
        poolsKey,
        recordKey(sent || 'none'),
        recordKey(fresh || 'none'),
        req.pool,
        req.holder,
        req.slots,
        clock(),
        o.ticketTtlMs,
        sent,
        req.enqueue ? '1' : '0',
        fresh,
        req.tenantId,
        TICKET_RECORD_SECONDS,
      );
      if (reply[0] === 'granted') return { status: 'granted' };
      if (reply[0] === 'full') return { status: 'full', queueSize: Number(reply[3]) };
      return { status: 'queued', ticketId: String(reply[1]), position: Number(reply[2]), queueSize: Number(reply[3]) };
    },
    async release(pool, holder) {
      return (await redis.zrem(keys(pool).holders, holder)) > 0;
    },
    async ticket(ticketId) {
      const r = await redis.hgetall(recordKey(ticketId));
      return r.pool && r.tenant ? { ticketId, pool: r.pool, tenantId: r.tenant } : undefined;
    },
    async leaveQueue(t) {
      const k = keys(t.pool);
      await redis.multi().zrem(k.queue, t.ticketId).zrem(k.seen, t.ticketId).exec();
    },
    async usage(pool) {
      const { inUse, queueSize } = await usage(pool);
      return { inUse, queueSize };
    },
    async holders(pool) {
      const flat = await redis.zrange(keys(pool).holders, '0', '-1', 'WITHSCORES');
      const out: { holder: string; grantedAt: number }[] = [];
      for (let i = 0; i < flat.length; i += 2) out.push({ holder: flat[i]!, grantedAt: Number(flat[i + 1]) });
      return out;
    },
    async pools() {
      return redis.smembers(poolsKey);
    },
    async expireTickets() {
      let n = 0;
      for (const pool of await redis.smembers(poolsKey)) n += (await usage(pool)).expired;
      return n;
    },
  };
}
