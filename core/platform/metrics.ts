/**
 * Prometheus metrics (prom-client): one registry per process, served at `GET /metrics` on a listener
 * of its own (METRICS_PORT, AGENT_METRICS_PORT), never on the public port: scrapes reach neither the
 * API's routes nor its auth, and the API's port exposes nothing of them. What each process exports:
 * docs/api.md ("Health and metrics").
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Gauge, Registry, type Metric } from 'prom-client';
import type { Logger } from './log.ts';
import { orAfter } from './time.ts';

export type { Registry } from 'prom-client';

/** A registry of this process's metrics (a fresh one: tests run several "processes" in one). */
export function createMetricsRegistry(): Registry {
  return new Registry();
}

/** The metric registered under `name`, or the one `make` registers (the same app built twice in a process reuses it). */
export function metricOnce<M extends Metric>(registry: Registry, name: string, make: () => M): M {
  return (registry.getSingleMetric(name) as M | undefined) ?? make();
}

/** How long a scrape waits for a value read from a store before it answers without it. */
const COLLECT_TIMEOUT_MS = 2_000;

/**
 * A gauge whose values are read at scrape time (`read`: label values → value), from the database or
 * Redis: nothing runs between scrapes. A read that fails or takes longer than 2 s leaves the gauge
 * without values for that scrape (and logs a warning); the scrape itself still answers.
 */
export function collectedGauge<L extends string>(
  registry: Registry,
  o: {
    name: string;
    help: string;
    labelNames: readonly L[];
    read: () => Promise<{ labels: Partial<Record<L, string>>; value: number }[]>;
    log: Logger;
  },
): Gauge<L> {
  return metricOnce(
    registry,
    o.name,
    () =>
      new Gauge<L>({
        name: o.name,
        help: o.help,
        labelNames: o.labelNames,
        registers: [registry],
        async collect() {
          this.reset();
          const timedOut = Symbol('timed out');
          try {
            const rows = await orAfter(o.read(), COLLECT_TIMEOUT_MS, timedOut);
            if (rows === timedOut)
              o.log.warn({ metric: o.name, timeoutMs: COLLECT_TIMEOUT_MS }, 'metric not collected in time');
            else for (const r of rows) this.set(r.labels, r.value);
          } catch (err) {
            o.log.warn({ err, metric: o.name }, 'metric not collected');
          }
        },
      }),
  );
}

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/**
 * Serves `registry` at `GET /metrics` on `port` (and the process's own figures: CPU, memory, event
 * loop lag, prom-client's defaults). Anything else is 404. A port that cannot be bound fails start-up
 * with the variable named, rather than leaving an operator's scrapes silently empty.
 */
export async function startMetricsServer(o: {
  registry: Registry;
  port: number;
  host?: string;
  /** The variable that set the port, for the start-up error. */
  variable: string;
  log: Logger;
}): Promise<MetricsServer> {
  collectDefaultMetrics({ register: o.registry });
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Not found: metrics are at GET /metrics\n');
      return;
    }
    o.registry.metrics().then(
      (text) => res.writeHead(200, { 'Content-Type': o.registry.contentType }).end(text),
      (err: unknown) => {
        o.log.warn({ err }, 'metrics scrape failed');
        res.writeHead(500, { 'Content-Type': 'text/plain' }).end('metrics could not be collected\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new Error(
          `${o.variable}: cannot listen on port ${o.port} for metrics (${err.code ?? err.message}); set another port, or 0 for none`,
        ),
      ),
    );
    server.listen(o.port, o.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  o.log.info({ port }, 'metrics listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
