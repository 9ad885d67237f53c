import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { mayRestorePriority } from './process-priority.ts';
import {
  delaySpareStarts,
  niceWhileSpare,
  procExecutorClass,
  procPoolClass,
  type ProcExecutorShape,
  type ProcPoolShape,
} from './spare-processes.ts';

/** A pool with agents-js's shape: spares started (procWatchTask) and taken (launchJob), with times. */
function fakePool() {
  const started: number[] = [];
  const t0 = performance.now();
  class Pool implements ProcPoolShape {
    closed = false;
    warmedProcQueue = { items: [] as unknown[] };
    async launchJob(_info: unknown): Promise<void> {
      this.warmedProcQueue.items.shift();
    }
    async procWatchTask(_procUnlock: unknown): Promise<void> {
      started.push(performance.now() - t0);
      this.warmedProcQueue.items.push('spare');
    }
  }
  delaySpareStarts(Pool.prototype, 200);
  return { pool: new Pool(), started };
}

describe('spare voice processes', () => {
  it("finds agents-js's process pool in the installed version, with what the delay patches", async () => {
    const pool = await procPoolClass();
    expect(pool, 'agents-js ipc/proc_pool.js ProcPool with launchJob and procWatchTask').toBeDefined();
  });

  it('starts the first spare at once, and a replacement only some time after a call took the last one', async () => {
    const { pool, started } = fakePool();
    await pool.procWatchTask(null);
    expect(started[0]).toBeLessThan(100);
    await pool.launchJob(null);
    await pool.procWatchTask(null);
    expect(started[1]).toBeGreaterThanOrEqual(190);
  });

  it('starts a replacement at once when a call finds no spare ready', async () => {
    const { pool, started } = fakePool();
    await pool.procWatchTask(null);
    await pool.launchJob(null);
    // The replacement waits; a second call comes, finds none, and wakes it.
    const replacement = pool.procWatchTask(null);
    await new Promise((r) => setTimeout(r, 20));
    expect(started).toHaveLength(1);
    const second = pool.launchJob(null);
    await replacement;
    await second;
    expect(started[1]! - started[0]!).toBeLessThan(150);
  });
});

/** A process's main-thread niceness (field 19 of its stat). */
const niceOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[16]);

describe('spare voice processes, nicer while spare', () => {
  it("finds agents-js's job process class in the installed version, with what the patch wraps", async () => {
    expect(
      await procExecutorClass(),
      'agents-js ipc/job_proc_executor.js JobProcExecutor with start and launchJob',
    ).toBeDefined();
  });

  it.runIf(process.platform === 'linux' && mayRestorePriority())(
    'starts a process nicer, and gives it the normal priority back when a call takes it, or after a while',
    async () => {
      const niceAtLaunch: number[] = [];
      class Executor implements ProcExecutorShape {
        proc?: ChildProcess;
        async start(): Promise<void> {
          this.proc = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
        }
        async launchJob(_info: unknown): Promise<void> {
          niceAtLaunch.push(niceOf(this.proc!.pid!));
        }
      }
      niceWhileSpare(Executor.prototype, 10, 500);
      const [taken, waitedFor, left] = [new Executor(), new Executor(), new Executor()];
      try {
        await taken.start();
        await waitedFor.start();
        expect(niceOf(taken.proc!.pid!), 'a spare').toBe(10);
        await taken.launchJob(null);
        expect(niceAtLaunch, 'when the call is handed to it').toEqual([0]);
        expect(niceOf(waitedFor.proc!.pid!), 'a spare no call took yet').toBe(10);
        // A call finds no spare ready (the pool's queue is empty): the one starting is what it waits for.
        await fakePool().pool.launchJob(null);
        expect(niceOf(waitedFor.proc!.pid!), 'a spare a call waits for').toBe(0);
        await left.start();
        await new Promise((r) => setTimeout(r, 700));
        expect(niceOf(left.proc!.pid!), 'a spare after the longest it stays nicer').toBe(0);
      } finally {
        for (const e of [taken, waitedFor, left]) e.proc?.kill();
      }
    },
  );
});
