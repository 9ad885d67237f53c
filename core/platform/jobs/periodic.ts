import type { Logger } from '../log.ts';
import type { JobQueue } from './queue.ts';

/**
 * A durable job that runs every `intervalSeconds` (sweeps, retention): each process with job
 * workers offers it at start and then every interval, and the queue keeps one per interval slot
 * (singletonKey + singletonSeconds), so N processes still run it once per interval, and a run that
 * fails is retried by the queue like any other job.
 */
export function schedulePeriodic(jobs: JobQueue, name: string, intervalSeconds: number, log: Logger): { stop(): void } {
  const offer = () => {
    jobs
      .enqueue(name, {}, { singletonKey: name, singletonSeconds: intervalSeconds })
      .catch((err: unknown) => log.warn({ err, job: name }, 'periodic job could not be queued'));
  };
  offer();
  const timer = setInterval(offer, intervalSeconds * 1000);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
