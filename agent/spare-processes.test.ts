import { describe, expect, it } from 'vitest';
import { delaySpareStarts, procPoolClass, type ProcPoolShape } from './spare-processes.ts';

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
