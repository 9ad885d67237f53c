import { Counter, Gauge, Histogram } from 'prom-client';
import { metricOnce, type Registry } from '../core/platform/metrics.ts';
import type { AvatarHost } from './avatar/host.ts';

/**
 * A worker's own metrics, from its avatar host (docs/agent.md, "Health and metrics"): the frames its
 * calls published and those they skipped (not drawn in time), how late its ticks ran, and its calls.
 * The counters read the host's running totals at scrape time; the lag is observed every tick while
 * a call publishes.
 */
export function registerWorkerMetrics(registry: Registry, host: AvatarHost, labels: { pool: string }): void {
  const totals = (name: string, help: string, read: () => number) => {
    let reported = 0;
    metricOnce(
      registry,
      name,
      () =>
        new Counter({
          name,
          help,
          registers: [registry],
          collect() {
            const now = read();
            if (now > reported) this.inc(now - reported);
            reported = now;
          },
        }),
    );
  };
  totals(
    'avatar_frames_published_total',
    'Video frames the worker published, all its calls together',
    () => host.tickStats.shown,
  );
  totals(
    'avatar_frames_late_total',
    'Frames that fell due but were not drawn in time, so were skipped (never shown late), all calls together',
    () => host.tickStats.skipped,
  );
  const lag = metricOnce(
    registry,
    'avatar_render_lag_seconds',
    () =>
      new Histogram({
        name: 'avatar_render_lag_seconds',
        help: "How late the worker's frame ticks ran past their time while calls published (a tick is 10 ms)",
        buckets: [0.001, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28],
        registers: [registry],
      }),
  );
  host.onTickLag = (ms) => lag.observe(ms / 1000);
  metricOnce(
    registry,
    'avatar_worker_calls',
    () =>
      new Gauge({
        name: 'avatar_worker_calls',
        help: 'Calls the worker runs now, by its capacity pool',
        labelNames: ['pool'],
        registers: [registry],
        collect() {
          this.set(labels, host.calls.length);
        },
      }),
  );
}
