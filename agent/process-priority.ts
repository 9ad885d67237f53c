/**
 * The CPU priority (niceness) of another process, all its threads: Linux keeps a niceness per
 * thread, `setpriority` on a process id sets its main thread's only, and a thread takes its
 * creator's when it starts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setPriority } from 'node:os';

/** The capability that lowers a niceness once raised (Linux: CAP_SYS_NICE, bit 23 of CapEff). */
const CAP_SYS_NICE = 23n;

/**
 * Whether this process may give a process it made less nice again (root usually may; root in a
 * container without CAP_SYS_NICE, as Docker runs it by default, may not). Only then is a process
 * made nicer for a while: one made nicer for good would serve its call at that priority.
 */
export function mayRestorePriority(): boolean {
  try {
    const line = readFileSync('/proc/self/status', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('CapEff:'));
    return line !== undefined && ((BigInt(`0x${line.slice('CapEff:'.length).trim()}`) >> CAP_SYS_NICE) & 1n) === 1n;
  } catch {
    return false;
  }
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
