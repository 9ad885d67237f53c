import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import { PgBossQueue, type JobQueue } from './queue.ts';

export * from './queue.ts';

/** The job queue of a process, on the same PostgreSQL as everything else (pg-boss's own schema). */
export function createJobQueue(config: Config, databaseUrl: string, log: Logger): JobQueue {
  return new PgBossQueue(
    databaseUrl,
    {
      retryLimit: config.JOB_RETRY_LIMIT,
      retryDelaySeconds: config.JOB_RETRY_DELAY_SECONDS,
      expireSeconds: config.JOB_EXPIRE_SECONDS,
      maintenanceSeconds: config.JOB_MAINTENANCE_SECONDS,
      pollingSeconds: config.JOB_POLL_SECONDS,
    },
    log,
  );
}
