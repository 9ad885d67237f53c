/**
 * The CPU priority (niceness) of another process, all its threads: Linux keeps a niceness per
 * thread, `setpriority` on a process id sets its main thread's only, and a thread takes its
 * creator's when it starts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setPriority } from 'node:os';

/** The capability that lowers a niceness once raised (Linux: CAP_SYS_NICE, bit 23 of CapEff). */
const CAP_SYS_NICE = 23n;
/** RLIMIT_NICE lets an unprivileged process (and its children) go down to a niceness of 20 minus it. */
const RLIMIT_NICE_TO_ZERO = 20;

/**
 * Whether this process may give a process it made less nice again: with CAP_SYS_NICE (root
 * usually; not root in a container that drops it, as Docker does by default), or with a nice
 * limit (RLIMIT_NICE, `ulimit -e`, compose's `ulimits: { nice: 20 }`) of 20, which lets any user
 * go back down to 0. Only then is a process made nicer for a while: one made nicer for good would
 * serve its call at that priority.
 */
export function mayRestorePriority(): boolean {
  try {
    return restorable(readFileSync('/proc/self/status', 'utf8'), readFileSync('/proc/self/limits', 'utf8'));
  } catch {
    return false;
  }
}

/** The rule of mayRestorePriority, on the texts of /proc/self/status and /proc/self/limits. */
export function restorable(status: string, limits: string): boolean {
  const caps = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  if (caps && ((BigInt(`0x${caps}`) >> CAP_SYS_NICE) & 1n) === 1n) return true;
  const limit = /^Max nice priority\s+(\S+)/m.exec(limits)?.[1];
  return limit === 'unlimited' || Number(limit) >= RLIMIT_NICE_TO_ZERO;
}

/** The thread ids of process `pid` (just `pid` where /proc cannot tell). */
export function threadsOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).map(Number);
  } catch {
    return [pid];
  }
}

/** Sets the niceness of every thread of `pid`; false where one could not be set (gone, or not permitted). */
export function setProcessNice(pid: number, nice: number): boolean {
  let all = true;
  for (const tid of threadsOf(pid)) {
    try {
      setPriority(tid, nice);
    } catch {
      all = false;
    }
  }
  return all;
}
