import { ClipCacheWorker } from '../avatars/clip-cache.ts';
import { ClipWorker } from '../avatars/clips.ts';
import { defaultClipsFor } from '../avatars/default-clips.ts';
import { LoopWorker } from '../avatars/generation.ts';
import { RenderProcesses } from '../avatars/render-process.ts';
import type { Services } from '../services.ts';

export interface RunningWorkers {
  loops: LoopWorker;
  clips: ClipWorker;
  /** Frame caches of accepted uploaded clips. */
  clipCaches: ClipCacheWorker;
  /** Stops taking jobs; running ones get `timeoutMs` to finish, then fail (and retry elsewhere). */
  stop(opts?: { timeoutMs?: number }): Promise<void>;
}

/**
 * Starts this process's job workers: avatar loop generation, motion-library clips and the frame
 * caches of uploaded clips (each render in a child process; `concurrency` of each kind).
 * Started by the API server (`JOB_WORKERS` > 0) and by `tsx core/jobs/worker-main.ts`.
 */
export async function startJobWorkers(services: Services, opts: { concurrency?: number; loopSeconds?: number } = {}): Promise<RunningWorkers> {
  const renders = new RenderProcesses();
  const loops = new LoopWorker({
    sql: services.sql,
    jobs: services.jobs,
    storage: services.storage,
    assets: services.portraitAssets,
    usage: services.usage,
    log: services.log.child({ component: 'jobs' }),
    renders,
    loopSeconds: opts.loopSeconds ?? services.config.AVATAR_LOOP_SECONDS,
    concurrency: opts.concurrency ?? Math.max(1, services.config.JOB_WORKERS),
    defaultClips: defaultClipsFor(services.config.DEFAULT_MOTION_CLIPS),
  });
  const clips = new ClipWorker({
    sql: services.sql,
    jobs: services.jobs,
    storage: services.storage,
    assets: services.portraitAssets,
    log: services.log.child({ component: 'jobs' }),
    renders,
    concurrency: opts.concurrency ?? Math.max(1, services.config.JOB_WORKERS),
  });
  const clipCaches = new ClipCacheWorker({
    sql: services.sql,
    jobs: services.jobs,
    storage: services.storage,
    log: services.log.child({ component: 'jobs' }),
    renders,
    concurrency: opts.concurrency ?? Math.max(1, services.config.JOB_WORKERS),
    ffmpegPath: services.config.FFMPEG_PATH,
  });
  await loops.start();
  await clips.start();
  await clipCaches.start();
  return {
    loops,
    clips,
    clipCaches,
    stop: async (o = {}) => {
      await services.jobs.stop(o);
      renders.killAll();
    },
  };
}
