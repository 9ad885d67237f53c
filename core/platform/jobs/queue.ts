import PgBoss from 'pg-boss';
import type { Sql, Tx } from '../db/index.ts';
import type { Logger } from '../log.ts';

/**
 * Durable background jobs (PostgreSQL through pg-boss 10, in its own schema `pgboss`).
 *
 * Enqueueing shares the caller's transaction: pg-boss 10 sends through any executor given as
 * `db`, and `txExecutor` adapts a postgres.js transaction to it, so the job row is inserted (or
 * not) together with the state change that asked for it. No outbox table is needed.
 *
 * A job that throws is retried with exponential backoff (retryLimit, retryDelay, retryBackoff);
 * a job whose process died stays `active` until its expiry and is then retried by pg-boss's
 * maintenance (run by any process with a started queue), so a crash loses nothing.
 */
export interface JobOptions {
  /** At most one queued-or-active job per key and queue name (pg-boss "stately" policy is per queue; this is the per-job key). */
  singletonKey?: string;
  /** Queue that receives a copy of the job once it has failed for good (out of retries). */
  deadLetter?: string;
  /** With singletonKey: at most one job per key in each slot of this many seconds (a second send in the slot is dropped). */
  singletonSeconds?: number;
}

export interface JobContext {
  id: string;
  /** 0 on the first attempt. */
  retryCount: number;
  retryLimit: number;
}

export type JobHandler<T> = (data: T, job: JobContext) => Promise<void>;

export interface JobQueue {
  /** Installs the schema and queues (idempotent); called lazily by enqueue and work. */
  start(): Promise<void>;
  /** Inserts a job; within `tx` it commits or rolls back with the transaction. Returns the job id. */
  enqueue(name: string, data: object, opts?: JobOptions, tx?: Tx): Promise<string | null>;
  /** Runs `handler` for jobs of `name` in this process (one at a time per registered worker). */
  work<T>(name: string, handler: JobHandler<T>, opts?: { concurrency?: number }): Promise<void>;
  /** Graceful: waits up to `timeoutMs` for running handlers, then fails what is left (so it retries). */
  stop(opts?: { timeoutMs?: number }): Promise<void>;
}

export interface QueueSettings {
  /** Attempts after the first. */
  retryLimit: number;
  /** Seconds before the first retry; doubled each time with retryBackoff. */
  retryDelaySeconds: number;
  /** A job running longer is failed (and retried); also how long a dead worker's job waits to be retried. */
  expireSeconds: number;
  /** How often this process runs pg-boss maintenance (expiring dead jobs among others). */
  maintenanceSeconds: number;
  /** How often an idle worker polls for jobs. */
  pollingSeconds: number;
}

/** A postgres.js transaction as pg-boss's `db` executor ($1-style parameters, `{ rows }` back). */
function txExecutor(tx: Tx): PgBoss.Db {
  return {
    executeSql: async (text: string, values: unknown[] = []) => {
      // Objects stay objects: postgres.js serialises them for the jsonb parameters they bind to.
      const params = values.map((v) => (v === undefined ? null : v));
      const rows = await tx.unsafe(text, params as never[]);
      return { rows: [...rows] };
    },
  };
}

export class PgBossQueue implements JobQueue {
  private readonly boss: PgBoss;
  private started?: Promise<void>;
  private readonly queues = new Map<string, Promise<void>>();
  private stopped = false;

  constructor(
    connectionString: string,
    private readonly settings: QueueSettings,
    private readonly log: Logger,
    opts: { maxConnections?: number } = {},
  ) {
    this.boss = new PgBoss({
      connectionString,
      max: opts.maxConnections ?? 4,
      application_name: 'avatar-jobs',
      maintenanceIntervalSeconds: settings.maintenanceSeconds,
      schedule: false,
    });
    this.boss.on('error', (err) => this.log.error({ err }, 'job queue error'));
  }

  start(): Promise<void> {
    if (this.stopped) return Promise.reject(new Error('The job queue is stopped'));
    this.started ??= this.boss.start().then(() => undefined);
    return this.started;
  }

  private ensureQueue(name: string): Promise<void> {
    let p = this.queues.get(name);
    if (!p) {
      p = (async () => {
        await this.start();
        const q: PgBoss.Queue = {
          name,
          policy: 'standard',
          retryLimit: this.settings.retryLimit,
          retryDelay: this.settings.retryDelaySeconds,
          retryBackoff: true,
          expireInSeconds: this.settings.expireSeconds,
        };
        if (await this.boss.getQueue(name)) await this.boss.updateQueue(name, q);
        else {
          try {
            await this.boss.createQueue(name, q);
          } catch (err) {
            // Another process created it in between.
            if (!(await this.boss.getQueue(name))) throw err;
          }
        }
      })();
      p.catch(() => this.queues.delete(name));
      this.queues.set(name, p);
    }
    return p;
  }

  async enqueue(name: string, data: object, opts: JobOptions = {}, tx?: Tx): Promise<string | null> {
    if (opts.deadLetter) await this.ensureQueue(opts.deadLetter);
    await this.ensureQueue(name);
    return this.boss.send(name, data, {
      ...(opts.singletonKey ? { singletonKey: opts.singletonKey } : {}),
      ...(opts.singletonSeconds ? { singletonSeconds: opts.singletonSeconds } : {}),
      ...(opts.deadLetter ? { deadLetter: opts.deadLetter } : {}),
      retryLimit: this.settings.retryLimit,
      retryDelay: this.settings.retryDelaySeconds,
      retryBackoff: true,
      expireInSeconds: this.settings.expireSeconds,
      ...(tx ? { db: txExecutor(tx) } : {}),
    });
  }

  async work<T>(name: string, handler: JobHandler<T>, opts: { concurrency?: number } = {}): Promise<void> {
    await this.ensureQueue(name);
    const n = Math.max(1, opts.concurrency ?? 1);
    for (let i = 0; i < n; i++) {
      await this.boss.work<T>(
        name,
        { batchSize: 1, includeMetadata: true, pollingIntervalSeconds: this.settings.pollingSeconds },
        async ([job]) => {
          if (!job) return;
          await handler(job.data, { id: job.id, retryCount: job.retryCount, retryLimit: job.retryLimit });
        },
      );
    }
  }

  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (!this.started) return;
    await this.started.catch(() => {});
    await this.boss.stop({ graceful: true, wait: true, timeout: opts.timeoutMs ?? 10_000, close: true });
  }

  /** The pg-boss instance, for tests and operator tooling. */
  get raw(): PgBoss {
    return this.boss;
  }
}

/** States of a job still to run, running, or failed for good (completed and cancelled ones are history). */
const COUNTED_STATES = ['created', 'retry', 'active', 'failed'];

/**
 * Jobs per queue and state, read from pg-boss's table (none before the queue's first start made
 * its schema): what the `avatar_jobs` metric exports.
 */
export async function jobCounts(sql: Sql): Promise<{ queue: string; state: string; count: number }[]> {
  const [schema] = await sql<{ exists: boolean }[]>`select to_regclass('pgboss.job') is not null as exists`;
  if (!schema?.exists) return [];
  return sql<{ queue: string; state: string; count: number }[]>`
    select name as queue, state::text as state, count(*)::int as count from pgboss.job
    where state::text in ${sql(COUNTED_STATES)} group by name, state`;
}
