import type { MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import { Histogram } from 'prom-client';
import { metricOnce } from '../core/platform/metrics.ts';
import { registerPlatformGauges } from '../core/wiring/metrics.ts';
import type { Services } from '../core/wiring/services.ts';
import type { AppEnv } from './context.ts';

/** Seconds: from a cached read (ms) to a long upload or render (minutes). */
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/**
 * The route a request matched, as its template (`/api/v1/avatars/{avatarId}`, the OpenAPI form), or
 * `unmatched`: the label never takes a concrete path, so its values stay as few as the routes.
 */
function routeTemplate(c: Parameters<MiddlewareHandler<AppEnv>>[0]): string {
  const route = matchedRoutes(c)
    .filter((r) => r.method !== 'ALL' && !r.path.endsWith('*'))
    .at(-1);
  return route ? route.path.replace(/:([A-Za-z0-9_]+)(\{[^}]*\})?/g, '{$1}') : 'unmatched';
}

/**
 * The API's metrics on the process's registry (services.metrics): the platform's gauges (read on
 * scrape) and `http_request_duration_seconds`, which the returned middleware observes: from the
 * request's arrival to its answer's head (a streamed body, a turn or a media file, goes on after it).
 */
export function apiMetrics(services: Services): MiddlewareHandler<AppEnv> {
  const registry = services.metrics;
  registerPlatformGauges(registry, services);
  const duration = metricOnce(
    registry,
    'http_request_duration_seconds',
    () =>
      new Histogram({
        name: 'http_request_duration_seconds',
        help: 'API requests: time to the answer, by method, route template and status',
        labelNames: ['method', 'route', 'status'],
        buckets: BUCKETS,
        registers: [registry],
      }),
  );
  return async (c, next) => {
    const start = performance.now();
    try {
      await next();
    } finally {
      duration.observe(
        { method: c.req.method, route: routeTemplate(c), status: String(c.res.status) },
        (performance.now() - start) / 1000,
      );
    }
  };
}
