/**
 * When the worker starts the spare voice process that replaces one a call has taken.
 *
 * agents-js keeps `numIdleProcesses` voice processes started and initialised, and starts a new one
 * the moment a call takes one. Starting one loads and compiles agents-js, the models' clients and
 * onnxruntime, and warms the VAD and the TTS: a CPU profile of a worker's first call had that new
 * process take a whole core from 1 s to 6 s after the user joined, on a 2-core machine whose other
 * core the call's own start (the avatar joining, its first frames, the greeting) already filled.
 * So the spare starts SPARE_START_DELAY_MS after a call took the last one, or at once when a call
 * is waiting for it; and where the worker may restore its priority afterwards (process-priority.ts),
 * it starts and waits nicer (AGENT_SPARE_NICE) than the calls' processes, which it then gives way
 * to (its start landed on a call's first question, the reply's slowest), and is given the normal
 * priority back, every thread of it, when a call takes it, when a call waits for it, or after
 * SPARE_NICE_MAX_MS.
 *
 * agents-js 1.9 has no option for this: its process pool (`ipc/proc_pool.js`, not exported) is
 * patched here, once per worker process. If a later agents-js moves it, spares start as agents-js
 * starts them and a warning says so.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from '../core/platform/log.ts';
import { mayRestorePriority, setProcessNice } from './process-priority.ts';

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
const NICED = Symbol('avatar.spareNice');

/** The parts of agents-js's JobProcExecutor used here: its child process, started, then given a call. */
export interface ProcExecutorShape {
  proc?: { pid?: number };
  start(): Promise<void>;
  launchJob(info: unknown): Promise<void>;
}

/** agents-js's JobProcExecutor class, as the worker's own import of agents-js loads it. */
export const procExecutorClass = () =>
  agentsIpcClass<ProcExecutorShape>('job_proc_executor.js', 'JobProcExecutor', ['start', 'launchJob']);

/** agents-js's ProcPool class, as the worker's own import of agents-js loads it. */
export const procPoolClass = () =>
  agentsIpcClass<ProcPoolShape>('proc_pool.js', 'ProcPool', ['launchJob', 'procWatchTask']);

/**
 * A class of agents-js's `ipc` folder (not exported by the package), undefined unless it is there
 * with the methods the patches here wrap.
 */
async function agentsIpcClass<T>(file: string, name: string, methods: string[]): Promise<{ prototype: T } | undefined> {
  const require = createRequire(import.meta.url);
  const dist = path.dirname(require.resolve('@livekit/agents'));
  const mod = (await import(pathToFileURL(path.join(dist, 'ipc', file)).href).catch(() => undefined)) as
    Record<string, { prototype: Record<string, unknown> } | undefined> | undefined;
  const cls = mod?.[name];
  return cls && methods.every((m) => typeof cls.prototype[m] === 'function')
    ? (cls as unknown as { prototype: T })
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
    // A call that finds no spare ready waits for one: it starts now, at the normal priority.
    if (this.warmedProcQueue.items.length === 0) {
      for (const wake of sleepers) wake();
      restoreAll();
    }
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

/**
 * Voice processes start at niceness `nice` and get 0 back when a call takes them (see above); not
 * where the worker could not give it back, nor with `nice` 0. Whether they do.
 */
export async function niceSpareProcesses(nice: number, log: Logger): Promise<boolean> {
  if (nice === 0) return false;
  if (!mayRestorePriority()) {
    log.info(
      'spare voice processes start at normal priority: the worker may not restore a priority (CAP_SYS_NICE, or a nice limit of 20)',
    );
    return false;
  }
  const executor = await procExecutorClass();
  if (!executor) {
    log.warn("agents-js's job process is not the one this version had: spare voice processes start at normal priority");
    return false;
  }
  niceWhileSpare(executor.prototype, nice);
  return true;
}

/**
 * How long a spare stays nicer at most: on a machine its calls keep busy, a nicer process gets
 * little CPU, and agents-js gives a process 10 s to initialise. Long enough for a call's first
 * question (the spare starts SPARE_START_DELAY_MS into the call).
 */
const SPARE_NICE_MAX_MS = 4000;

/** The spares now nicer, each with the timer that gives it its priority back. */
const nicer = new Map<ProcExecutorShape, NodeJS.Timeout>();

/** `executor`'s process back at the normal priority, if it was nicer. */
function restore(executor: ProcExecutorShape): void {
  const timer = nicer.get(executor);
  if (!timer) return;
  clearTimeout(timer);
  nicer.delete(executor);
  if (executor.proc?.pid) setProcessNice(executor.proc.pid, 0);
}

/** Every spare back at the normal priority: a call is waiting for one. */
function restoreAll(): void {
  for (const executor of [...nicer.keys()]) restore(executor);
}

/** The patch itself, on a JobProcExecutor prototype (exported for its test). */
export function niceWhileSpare(executor: ProcExecutorShape, nice: number, maxMs = SPARE_NICE_MAX_MS): void {
  const proto = executor as ProcExecutorShape & { [NICED]?: true };
  if (proto[NICED]) return;
  proto[NICED] = true;
  const start = proto.start;
  proto.start = async function (this: ProcExecutorShape) {
    await start.call(this);
    if (!this.proc?.pid || !setProcessNice(this.proc.pid, nice)) return;
    const timer = setTimeout(() => restore(this), maxMs);
    timer.unref();
    nicer.set(this, timer);
  };
  const launchJob = proto.launchJob;
  proto.launchJob = function (this: ProcExecutorShape, info: unknown) {
    restore(this);
    return launchJob.call(this, info);
  };
}
