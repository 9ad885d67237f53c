import http from 'node:http';
import { performance } from 'node:perf_hooks';

/**
 * A small HTTP load generator on node:http (keep-alive agent, fixed connection pool), so the
 * benchmarks need no extra dependency. Two modes:
 * - closed loop: N connections, each sending its next request when the previous answer ends
 *   (measures the most the server can do);
 * - paced (open loop): requests sent on a fixed schedule whatever the server does, latency
 *   measured from the scheduled time, so a slow server cannot hide its queueing (no coordinated
 *   omission).
 */

interface NextRequest {
  path: string;
  headers?: http.OutgoingHttpHeaders;
}

export interface LoadTarget {
  port: number;
  host?: string;
  /** Called once per request, in order; spreads requests over keys or tenants. */
  next(i: number): NextRequest;
}

export interface PhaseResult {
  mode: 'closed' | 'paced';
  durationS: number;
  completed: number;
  /** Answers with a status other than 200. */
  non200: number;
  /** Transport errors (reset, refused). */
  errors: number;
  statuses: Record<string, number>;
  rps: number;
  /** Latency in milliseconds, sorted ascending. */
  latenciesMs: Float64Array;
  /** CPU time the load generator itself spent, in ms (user + system). */
  clientCpuMs: number;
  /** Paced only: the schedule asked for this rate. */
  targetRps?: number;
  /** Paced only: requests that could not be sent before the phase ended. */
  unsent?: number;
}

function send(agent: http.Agent, target: LoadTarget, req: NextRequest): Promise<number> {
  return new Promise((resolve, reject) => {
    const r = http.request(
      {
        host: target.host ?? '127.0.0.1',
        port: target.port,
        path: req.path,
        method: 'GET',
        headers: req.headers,
        agent,
      },
      (res) => {
        res.on('data', () => {});
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      },
    );
    r.on('error', reject);
    r.end();
  });
}

function finish(
  mode: PhaseResult['mode'],
  startedMs: number,
  lat: number[],
  statuses: Map<number, number>,
  errors: number,
  cpu0: NodeJS.CpuUsage,
): PhaseResult {
  const durationS = (performance.now() - startedMs) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const latenciesMs = Float64Array.from(lat).sort();
  let non200 = 0;
  for (const [s, n] of statuses) if (s !== 200) non200 += n;
  return {
    mode,
    durationS,
    completed: lat.length,
    non200,
    errors,
    statuses: Object.fromEntries([...statuses].map(([s, n]) => [String(s), n])),
    rps: lat.length / durationS,
    latenciesMs,
    clientCpuMs: (cpu.user + cpu.system) / 1000,
  };
}

/** `connections` requests in flight at all times, for `durationMs`. */
export async function closedLoop(
  target: LoadTarget,
  o: { connections: number; durationMs: number; counter?: { i: number } },
): Promise<PhaseResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.connections });
  const counter = o.counter ?? { i: 0 };
  const lat: number[] = [];
  const statuses = new Map<number, number>();
  let errors = 0;
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const deadline = started + o.durationMs;
  const worker = async () => {
    while (performance.now() < deadline) {
      const req = target.next(counter.i++);
      const t0 = performance.now();
      try {
        const status = await send(agent, target, req);
        lat.push(performance.now() - t0);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: o.connections }, worker));
  const result = finish('closed', started, lat, statuses, errors, cpu0);
  agent.destroy();
  return result;
}

/** Requests at a fixed rate for `durationMs` over a pool of `connections`; latency counted from each request's scheduled time. */
export async function paced(
  target: LoadTarget,
  o: { rps: number; durationMs: number; connections: number; counter?: { i: number } },
): Promise<PhaseResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.connections });
  const counter = o.counter ?? { i: 0 };
  const lat: number[] = [];
  const statuses = new Map<number, number>();
  let errors = 0;
  const total = Math.round((o.rps * o.durationMs) / 1000);
  const intervalMs = 1000 / o.rps;
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  let next = 0;
  let inFlight = 0;
  // Past the end of the schedule by this much, stop waiting: what is still queued is reported unsent.
  const hardStop = started + o.durationMs + 5_000;

  await new Promise<void>((resolve) => {
    const maybeDone = () => {
      if (next >= total && inFlight === 0) resolve();
    };
    const fire = (scheduled: number) => {
      inFlight++;
      send(agent, target, target.next(counter.i++))
        .then((status) => {
          lat.push(performance.now() - scheduled);
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        })
        .catch(() => {
          errors++;
        })
        .finally(() => {
          inFlight--;
          maybeDone();
        });
    };
    const tick = () => {
      const now = performance.now();
      if (now > hardStop) {
        next = total;
        return resolve();
      }
      while (next < total && started + next * intervalMs <= now) {
        fire(started + next * intervalMs);
        next++;
      }
      if (next >= total) return maybeDone();
      const wait = started + next * intervalMs - performance.now();
      if (wait > 2) setTimeout(tick, wait - 1);
      else setImmediate(tick);
    };
    tick();
  });
  // Throughput: what completed from the first scheduled send to the last answer (a server that
  // falls behind drains its queue after the schedule ends, which lowers the figure).
  const result = finish('paced', started, lat, statuses, errors, cpu0);
  result.targetRps = o.rps;
  result.unsent = total - result.completed - errors;
  agent.destroy();
  return result;
}

/** The q-quantile (0..1) of an ascending array, nearest rank. */
export function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

export function merge(arrays: Float64Array[]): Float64Array {
  const out = new Float64Array(arrays.reduce((n, a) => n + a.length, 0));
  let off = 0;
  for (const a of arrays) {
    out.set(a, off);
    off += a.length;
  }
  return out.sort();
}

export function median(xs: number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
