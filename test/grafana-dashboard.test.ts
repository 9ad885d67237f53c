import { readFileSync } from 'node:fs';
import { collectDefaultMetrics } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerWorkerMetrics } from '../agent/metrics.ts';
import type { AvatarHost } from '../agent/avatar/host.ts';
import { apiMetrics } from '../api/metrics.ts';
import { createLogger } from '../core/platform/log.ts';
import { createMetricsRegistry } from '../core/platform/metrics.ts';
import type { Services } from '../core/wiring/services.ts';

/** The series names each exported metric gives (a histogram's _bucket, _sum and _count). */
function exportedSeries(): Set<string> {
  const registry = createMetricsRegistry();
  collectDefaultMetrics({ register: registry });
  // Registering reads nothing: the stores behind the gauges are only asked on a scrape.
  apiMetrics({ metrics: registry, log: createLogger('silent') } as unknown as Services);
  const host = { tickStats: { shown: 0, skipped: 0 }, calls: [] } as unknown as AvatarHost;
  registerWorkerMetrics(registry, host, { pool: 'primary' });
  const names = new Set<string>();
  for (const m of registry.getMetricsAsArray()) {
    const { name, type } = m as unknown as { name: string; type: string };
    names.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
  }
  return names;
}

describe('docker/grafana-dashboard.json', () => {
  const dashboard = JSON.parse(readFileSync(new URL('../docker/grafana-dashboard.json', import.meta.url), 'utf8')) as {
    panels: { title: string; targets: { expr: string }[] }[];
  };

  it('queries only metrics the API and the worker export, and every one the issue names', () => {
    const exported = exportedSeries();
    const queried = new Set<string>();
    for (const p of dashboard.panels)
      for (const t of p.targets)
        for (const [name] of t.expr.matchAll(/\b(?:http|avatar|process|nodejs)_[a-z_]+\b/g)) queried.add(name);
    expect([...queried].filter((n) => !exported.has(n))).toEqual([]);
    for (const name of [
      'http_request_duration_seconds_bucket',
      'avatar_live_sessions',
      'avatar_capacity_queue_size',
      'avatar_credits_reserved_micros',
      'avatar_jobs',
      'avatar_frames_published_total',
      'avatar_frames_late_total',
      'avatar_render_lag_seconds_bucket',
    ])
      expect(queried, `a panel queries ${name}`).toContain(name);
  });

  it('has a titled panel with a query for each view', () => {
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(8);
    for (const p of dashboard.panels) {
      expect(p.title).toBeTruthy();
      expect(p.targets.length).toBeGreaterThan(0);
    }
  });
});
