import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { mayRestorePriority, restorable, setProcessNice, threadsOf } from './process-priority.ts';

/** A thread's niceness, from /proc (field 19 of its stat, counted after the command's closing parenthesis). */
const niceOf = (pid: number, tid: number) =>
  Number(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ')[16]);

describe('process priority', () => {
  it.runIf(process.platform === 'linux')(
    'makes every thread of a process nicer, threads started later too, and less nice again where permitted',
    async () => {
      // A Node process that starts a worker thread once told to (over stdin).
      const child = spawn(
        process.execPath,
        [
          '-e',
          "process.stdin.once('data', () => new (require('node:worker_threads').Worker)('setInterval(() => {}, 1000)', { eval: true })); setInterval(() => {}, 1000)",
        ],
        { stdio: ['pipe', 'ignore', 'ignore'] },
      );
      try {
        await sleep(300);
        const pid = child.pid!;
        const before = threadsOf(pid);
        expect(before.length, "Node's own threads").toBeGreaterThan(1);
        expect(setProcessNice(pid, 10)).toBe(true);
        for (const tid of before) expect(niceOf(pid, tid), `thread ${tid}`).toBe(10);
        child.stdin!.write('go\n');
        let after = threadsOf(pid);
        for (let i = 0; i < 50 && after.length <= before.length; i++) {
          await sleep(50);
          after = threadsOf(pid);
        }
        const started = after.filter((t) => !before.includes(t));
        expect(started.length, 'the worker thread').toBeGreaterThan(0);
        for (const tid of started) expect(niceOf(pid, tid), `new thread ${tid}`).toBe(10);
        // Back to normal only with CAP_SYS_NICE (root, outside a container that drops it).
        expect(setProcessNice(pid, 0)).toBe(mayRestorePriority());
        if (mayRestorePriority()) for (const tid of after) expect(niceOf(pid, tid), `thread ${tid}`).toBe(0);
      } finally {
        child.kill();
      }
    },
  );
});

describe('whether a priority may be given back', () => {
  const limits = (nice: string) =>
    `Limit                     Soft Limit           Hard Limit           Units\nMax nice priority         ${nice}                    ${nice}                    \n`;
  it('with CAP_SYS_NICE (root), or a nice limit of 20 (compose ulimits), and not as root in a default Docker container', () => {
    expect(restorable('Name:\tnode\nCapEff:\t000001fffeffffff\n', limits('0')), 'root with every capability').toBe(
      true,
    );
    expect(restorable('CapEff:\t00000000a80425fb\n', limits('0')), "root with Docker's default capabilities").toBe(
      false,
    );
    expect(restorable('CapEff:\t0000000000000000\n', limits('20')), 'a user with a nice limit of 20').toBe(true);
    expect(restorable('CapEff:\t0000000000000000\n', limits('10')), 'a user with a nice limit of 10').toBe(false);
    expect(restorable('CapEff:\t0000000000000000\n', limits('unlimited'))).toBe(true);
    expect(restorable('', ''), 'nothing to read').toBe(false);
  });
});
