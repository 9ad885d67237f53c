import { ClipWorker } from '../avatars/clips.ts';
import { defaultClipsFor } from '../avatars/default-clips.ts';
import { LoopWorker } from '../avatars/generation.ts';
import { RenderProcesses } from '../avatars/render-process.ts';
import { VideoCacheWorker } from '../realtime/video-cache.ts';
import type { Services } from '../services.ts';

export interface RunningWorkers {
  loops: LoopWorker;
  clips: ClipWorker;
  /** Frame caches of avatars at other settings (POST /realtime/video-cache/plan). */
  videoCache: VideoCacheWorker;
  /** Stops taking jobs; running ones get `timeoutMs` to finish, then fail (and retry elsewhere). */
  stop(opts?: { timeoutMs?: number }): Promise<void>;
}

/**
 * Starts this process's job workers: avatar loop generation and motion-library clips (each render
 * in a child process; `concurrency` of each kind), and frame caches at other settings (in process:
 * decoding, resizing and encoding run on libuv's pool).
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
  const videoCache = new VideoCacheWorker({
    sql: services.sql,
    jobs: services.jobs,
    storage: services.storage,
    log: services.log.child({ component: 'jobs' }),
    concurrency: opts.concurrency ?? Math.max(1, services.config.JOB_WORKERS),
  });
  await loops.start();
  await clips.start();
  await videoCache.start();
  return {
    loops,
    clips,
    videoCache,
    stop: async (o = {}) => {
      await services.jobs.stop(o);
      renders.killAll();
    },
  };
}
