/**
 * When the worker starts the spare voice process that replaces one a call has taken.
 *
 * agents-js keeps `numIdleProcesses` voice processes started and initialised, and starts a new one
 * the moment a call takes one. Starting one loads and compiles agents-js, the models' clients and
 * onnxruntime, and warms the VAD and the TTS: a CPU profile of a worker's first call had that new
 * process take a whole core from 1 s to 6 s after the user joined, on a 2-core machine whose other
 * core the call's own start (the avatar joining, its first frames, the greeting) already filled.
 * So the spare starts SPARE_START_DELAY_MS after a call took the last one, or at once when a call
 * is waiting for it.
 *
 * agents-js 1.9 has no option for this: its process pool (`ipc/proc_pool.js`, not exported) is
 * patched here, once per worker process. If a later agents-js moves it, spares start as agents-js
 * starts them and a warning says so.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from '../core/platform/log.ts';

/** Long enough for a call's start (its avatar joined, its greeting begun, its first seconds of frames). */
export const SPARE_START_DELAY_MS = 5000;

/** The parts of agents-js's ProcPool used here. */
export interface ProcPoolShape {
  closed: boolean;
  warmedProcQueue: { items: unknown[] };
  launchJob(info: unknown): Promise<void>;
  procWatchTask(procUnlock: unknown): Promise<void>;
}

const PATCHED = Symbol('avatar.spareStartDelay');

/** agents-js's ProcPool class, as the worker's own import of agents-js loads it. */
export async function procPoolClass(): Promise<{ prototype: ProcPoolShape } | undefined> {
  const require = createRequire(import.meta.url);
  const dist = path.dirname(require.resolve('@livekit/agents'));
  const mod = (await import(pathToFileURL(path.join(dist, 'ipc', 'proc_pool.js')).href).catch(() => undefined)) as
    { ProcPool?: { prototype: ProcPoolShape } } | undefined;
  const proto = mod?.ProcPool?.prototype;
  return typeof proto?.launchJob === 'function' && typeof proto.procWatchTask === 'function'
    ? mod!.ProcPool
    : undefined;
}

/** Delays each spare voice process's start by `delayMs` after a call took one (see above). */
export async function delaySpareProcesses(delayMs: number, log: Logger): Promise<boolean> {
  const pool = await procPoolClass();
  if (!pool) {
    log.warn("agents-js's process pool is not the one this version had: spare voice processes start at once");
    return false;
  }
  delaySpareStarts(pool.prototype, delayMs);
  return true;
}

/** The patch itself, on a ProcPool prototype (exported for its test). */
export function delaySpareStarts(pool: ProcPoolShape, delayMs: number): void {
  const proto = pool as ProcPoolShape & { [PATCHED]?: true };
  if (proto[PATCHED]) return;
  proto[PATCHED] = true;
  let lastLaunchAt = -Infinity;
  const sleepers = new Set<() => void>();
  const launchJob = proto.launchJob;
  proto.launchJob = function (this: ProcPoolShape, info: unknown) {
    // A call that finds no spare ready waits for one: it starts now.
    if (this.warmedProcQueue.items.length === 0) for (const wake of sleepers) wake();
    lastLaunchAt = performance.now();
    return launchJob.call(this, info);
  };
  const procWatchTask = proto.procWatchTask;
  proto.procWatchTask = async function (this: ProcPoolShape, procUnlock: unknown) {
    const wait = lastLaunchAt + delayMs - performance.now();
    if (wait > 0 && !this.closed)
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          sleepers.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, wait);
        // A worker shutting down does not wait for it (the pool is closed by then: nothing starts).
        timer.unref();
        sleepers.add(wake);
      });
    return procWatchTask.call(this, procUnlock);
  };
}
