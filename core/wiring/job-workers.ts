import { ClipCacheWorker } from '../avatars/clip-cache.ts';
import { ClipWorker } from '../avatars/clips.ts';
import { defaultClipsFor } from '../../clips/declaration/default-clips.ts';
import { LoopWorker } from '../avatars/generation.ts';
import { RenderProcesses } from '../avatars/render-process.ts';
import { RECORDING_RETENTION_JOB } from '../recordings/library.ts';
import { SceneBuildWorker } from '../scenes/builder.ts';
import { SCENE_EXPIRY_JOB } from '../scenes/types.ts';
import { schedulePeriodic } from '../platform/jobs/periodic.ts';
import { VideoCacheWorker } from '../realtime/video-cache.ts';
import type { Services } from './services.ts';

export interface RunningWorkers {
  loops: LoopWorker;
  clips: ClipWorker;
  /** Frame caches of accepted uploaded clips. */
  clipCaches: ClipCacheWorker;
  /** Scene builds (POST /scenes). */
  scenes: SceneBuildWorker;
  /** Frame caches of avatars at other settings (POST /realtime/video-cache/plan). */
  videoCache: VideoCacheWorker;
  /** Stops taking jobs; running ones get `timeoutMs` to finish, then fail (and retry elsewhere). */
  stop(opts?: { timeoutMs?: number }): Promise<void>;
}

/**
 * Starts this process's job workers: avatar loop generation, motion-library clips, the frame
 * caches of uploaded clips and scene builds (each render in a child process; `concurrency` of each
 * kind), frame caches at other settings (in process: decoding, resizing and encoding run on libuv's
 * pool), and the periodic media janitors (recording retention, scene expiry).
 * Started by the API server (`JOB_WORKERS` > 0) and by `tsx core/wiring/job-worker-main.ts`.
 */
export async function startJobWorkers(
  services: Services,
  opts: { concurrency?: number; loopSeconds?: number } = {},
): Promise<RunningWorkers> {
  const renders = new RenderProcesses();
  // What every job worker takes.
  const common = {
    sql: services.sql,
    jobs: services.jobs,
    storage: services.storage,
    log: services.log.child({ component: 'jobs' }),
    concurrency: opts.concurrency ?? Math.max(1, services.config.JOB_WORKERS),
  };
  const loops = new LoopWorker({
    ...common,
    assets: services.portraitAssets,
    usage: services.usage,
    renders,
    loopSeconds: opts.loopSeconds ?? services.config.AVATAR_LOOP_SECONDS,
    defaultClips: defaultClipsFor(services.config.DEFAULT_MOTION_CLIPS),
  });
  const clips = new ClipWorker({
    ...common,
    assets: services.portraitAssets,
    renders,
  });
  const clipCaches = new ClipCacheWorker({
    ...common,
    renders,
    ffmpegPath: services.config.FFMPEG_PATH,
  });
  const scenes = new SceneBuildWorker({
    ...common,
    renders,
    fetcher: services.safeFetch,
    maxBytes: services.config.SCENE_MAX_BYTES,
    maxSeconds: services.config.SCENE_MAX_SECONDS,
    frameSize: services.config.SCENE_FRAME_SIZE,
    ffmpegPath: services.config.FFMPEG_PATH,
  });
  const videoCache = new VideoCacheWorker(common);
  await loops.start();
  await clips.start();
  await clipCaches.start();
  await scenes.start();
  await videoCache.start();
  // Media janitors, durable and periodic: recordings past retention or never finalised, expired scenes.
  await services.jobs.work(RECORDING_RETENTION_JOB, async () => void (await services.recordings.sweep()));
  await services.jobs.work(SCENE_EXPIRY_JOB, async () => void (await services.scenes.expireDue()));
  const sweeps = [RECORDING_RETENTION_JOB, SCENE_EXPIRY_JOB].map((name) =>
    schedulePeriodic(services.jobs, name, services.config.MEDIA_SWEEP_SECONDS, services.log),
  );
  return {
    loops,
    clips,
    clipCaches,
    scenes,
    videoCache,
    stop: async (o = {}) => {
      for (const s of sweeps) s.stop();
      await services.jobs.stop(o);
      renders.killAll();
    },
  };
}
