import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { VideoCacheRequest, VideoCacheResult } from '../../render/cli/video-cache-job.ts';
import type { RenderRequest, RenderResult } from '../../render/generate/index.ts';
import type { JobContext } from '../platform/jobs/queue.ts';

/** The render job's program (render/generate/job.ts in a process of its own). */
const RENDER_CHILD = fileURLToPath(new URL('../../render/cli/render-job.ts', import.meta.url));
/** The frame-cache-from-video program (render/framecache/from-video.ts in a process of its own). */
const VIDEO_CACHE_CHILD = fileURLToPath(new URL('../../render/cli/video-cache-job.ts', import.meta.url));
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

/** A rendered loop or clip: its MP4 and frame cache on local disk. */
export type RenderedFiles = Extract<RenderResult, { ok: true }>;

export type { VideoCacheRequest, VideoCacheResult };

/** A render that retrying cannot fix (no portrait, or the rig refuses it): the job fails at once. */
export class RenderRefused extends Error {
  override name = 'RenderRefused';
}

/**
 * How a failed render attempt ends: for good, with the error to store, on a refusal or on the
 * job's last attempt; otherwise (undefined) the job retries.
 */
export function finalRenderFailure(
  err: unknown,
  job: Pick<JobContext, 'retryCount' | 'retryLimit'>,
  what: 'Loop' | 'Clip',
): string | undefined {
  if (err instanceof RenderRefused) return err.message;
  if (job.retryCount >= job.retryLimit) return `${what} generation failed after ${job.retryCount + 1} attempts`;
  return undefined;
}

/** A child job ran past its time limit and was killed. */
export class ChildJobTimeout extends Error {
  override name = 'ChildJobTimeout';
}

export interface ChildJobOptions {
  /** Kill the child (SIGKILL) and reject with ChildJobTimeout past this many milliseconds. */
  timeoutMs?: number;
  /** Kill the child and reject with the signal's reason when it aborts. */
  signal?: AbortSignal;
  /** Names the job in the error of a crash ("clip render", "lipsync render"). */
  what: string;
}

/**
 * Heavy render work of this process in child processes (off the event loop; a crash there fails the
 * job, not the process): each child gets one JSON argument and answers one JSON line on stdout, and
 * is tracked while it runs so a stopping process can kill it. Programs are TypeScript run through
 * tsx (render/cli/*.ts).
 */
export class ChildJobs {
  private readonly running = new Set<ChildProcess>();

  /** Children running now. */
  get size(): number {
    return this.running.size;
  }

  /** Runs `program` with `request`; resolves with its JSON answer, rejects on a crash, a non-zero exit, the timeout or the signal. */
  run<T>(program: string, request: unknown, opts: ChildJobOptions): Promise<T> {
    return new Promise((resolve, reject) => {
      if (opts.signal?.aborted) return reject(opts.signal.reason);
      const child = spawn(process.execPath, ['--import', TSX_LOADER, program, JSON.stringify(request)], {
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
        env: { ...process.env, NODE_OPTIONS: '' },
      });
      this.running.add(child);
      let out = '';
      let errText = '';
      let stopped: Error | undefined;
      const stop = (why: Error) => {
        stopped ??= why;
        child.kill('SIGKILL');
      };
      const timer =
        opts.timeoutMs === undefined
          ? undefined
          : setTimeout(
              () => stop(new ChildJobTimeout(`${opts.what} ran past its limit of ${opts.timeoutMs} ms`)),
              opts.timeoutMs,
            );
      const onAbort = () =>
        stop(opts.signal!.reason instanceof Error ? opts.signal!.reason : new Error(`${opts.what} aborted`));
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
      child.stderr!.on('data', (b: Buffer) => (errText = (errText + b.toString()).slice(-4000)));
      child.on('error', reject);
      child.on('exit', (code, signal) => {
        this.running.delete(child);
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        if (stopped) return reject(stopped);
        const line = out.trim().split('\n').pop();
        if (code === 0 && line) {
          try {
            return resolve(JSON.parse(line) as T);
          } catch {
            /* fall through */
          }
        }
        reject(new Error(`${opts.what} exited with ${signal ?? code}: ${errText.trim().slice(-1000)}`));
      });
    });
  }

  /** Kills the running children (their jobs fail as crashes). */
  killAll(): void {
    for (const c of this.running) c.kill('SIGKILL');
  }
}

/**
 * The render child processes of this process's job workers (loops, clips, frame caches of videos):
 * each runs in a child process (ChildJobs), so a stopping worker can kill it.
 */
export class RenderProcesses {
  private readonly children = new ChildJobs();

  /**
   * Runs one render. A rig refusal rejects with RenderRefused; a crash or a non-zero exit rejects
   * with a plain Error (the job retries).
   */
  async render(req: RenderRequest, opts: Omit<ChildJobOptions, 'what'> = {}): Promise<RenderedFiles> {
    const result = await this.children.run<RenderResult>(RENDER_CHILD, req, {
      ...opts,
      what: req.clip ? 'clip render' : 'loop render',
    });
    if (!result.ok)
      throw new RenderRefused(`The portrait cannot be animated (${result.refused.code}): ${result.refused.message}`);
    return result;
  }

  /**
   * Builds a frame cache from a video file (render/cli/video-cache-job.ts). A refused video is a
   * result (`ok: false`, for the caller to settle); a crash or a non-zero exit rejects (the job retries).
   */
  videoCache(req: VideoCacheRequest, opts: Omit<ChildJobOptions, 'what'> = {}): Promise<VideoCacheResult> {
    return this.children.run<VideoCacheResult>(VIDEO_CACHE_CHILD, req, { ...opts, what: 'video frame cache' });
  }

  /** Kills the running renders (their jobs fail and retry elsewhere). */
  killAll(): void {
    this.children.killAll();
  }
}
