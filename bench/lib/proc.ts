import { existsSync, readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time of other processes (PostgreSQL backends, Redis, the server) from /proc, so a benchmark can
 * say where the CPU of each request went. Linux only: elsewhere every figure is NaN.
 */

const TICK_MS = 10; // USER_HZ is 100 on every Linux this runs on

interface Stat {
  pid: number;
  ppid: number;
  cpuMs: number;
}

function stat(pid: number): Stat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: split after its closing one.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { pid, ppid: Number(rest[1]), cpuMs: (Number(rest[11]) + Number(rest[12])) * TICK_MS };
  } catch {
    return undefined;
  }
}

function allPids(): number[] {
  if (!existsSync('/proc')) return [];
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number);
}

/** A process and all its descendants. */
export function processTree(root: number): number[] {
  const stats = allPids()
    .map(stat)
    .filter((s): s is Stat => Boolean(s));
  const out = [root];
  for (let i = 0; i < out.length; i++) for (const s of stats) if (s.ppid === out[i]) out.push(s.pid);
  return out;
}

/** Summed user + system CPU time of these processes, in ms (NaN without /proc). */
export function cpuMs(pids: number[]): number {
  if (!existsSync('/proc')) return Number.NaN;
  return pids.reduce((n, pid) => n + (stat(pid)?.cpuMs ?? 0), 0);
}

/** The first process whose command line matches. */
export function findProcess(match: (cmdline: string) => boolean): number | undefined {
  for (const pid of allPids()) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (match(cmd)) return pid;
    } catch {
      /* gone */
    }
  }
  return undefined;
}

/** The 1-minute load average (what else is running on the machine). */
export function loadAverage(): number {
  try {
    return Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
  } catch {
    return Number.NaN;
  }
}
