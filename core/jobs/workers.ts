import { LoopWorker } from '../avatars/generation.ts';
import type { Services } from '../services.ts';

export interface RunningWorkers {
  loops: LoopWorker;
  /** Stops taking jobs; running ones get `timeoutMs` to finish, then fail (and retry elsewhere). */
  stop(opts?: { timeoutMs?: number }): Promise<void>;
}

/**
 * Starts this process's job workers: avatar loop generation (each render in a child process).
 * Started by the API server (`JOB_WORKERS` > 0) and by `tsx core/jobs/worker-main.ts`.
 */
export async function startJobWorkers(services: Services, opts: { concurrency?: number; loopSeconds?: number } = {}): Promise<RunningWorkers> {
  const loops = new LoopWorker({
    sql: services.sql,
    jobs: services.jobs,
    storage: services.storage,
    assets: services.portraitAssets,
    usage: services.usage,
    log: services.log.child({ component: 'jobs' }),
    loopSeconds: opts.loopSeconds ?? services.config.AVATAR_LOOP_SECONDS,
    concurrency: opts.concurrency ?? Math.max(1, services.config.JOB_WORKERS),
  });
  await loops.start();
  return {
    loops,
    stop: async (o = {}) => {
      await services.jobs.stop(o);
      loops.killRenders();
    },
  };
}
