import { ApiError } from '../core/platform/errors.ts';
import { orAfter } from '../core/platform/time.ts';
import type { Services } from '../core/wiring/services.ts';
import type { App } from './context.ts';
import { errorResponse } from './errors.ts';

/** How long each dependency may take to answer the readiness check. */
const CHECK_TIMEOUT_MS = 2_000;

type DependencyStatus = 'ok' | 'down' | 'not_configured';

/** Each dependency's answer, checked side by side; a failure's reason goes to the log, not to the (unauthenticated) answer. */
async function checkDependencies(services: Services): Promise<Record<string, DependencyStatus>> {
  const { redis, livekit, sql, log } = services;
  const check = async (name: string, probe: (() => Promise<unknown>) | undefined): Promise<DependencyStatus> => {
    if (!probe) return 'not_configured';
    const late = Symbol('late');
    try {
      if ((await orAfter(probe(), CHECK_TIMEOUT_MS, late)) !== late) return 'ok';
      log.warn({ dependency: name, timeoutMs: CHECK_TIMEOUT_MS }, 'readiness check timed out');
    } catch (err) {
      log.warn(
        { dependency: name, reason: err instanceof Error ? err.message : String(err) },
        'readiness check failed',
      );
    }
    return 'down';
  };
  const [database, redisStatus, livekitStatus] = await Promise.all([
    check('database', () => sql`select 1`),
    check(
      'redis',
      redis &&
        (async () => {
          // A client that is reconnecting queues commands rather than failing them: down without waiting.
          if (redis.status !== 'ready') throw new Error(`redis connection ${redis.status}`);
          return redis.ping();
        }),
    ),
    check('livekit', livekit && (() => livekit.ping())),
  ]);
  return { database, redis: redisStatus, livekit: livekitStatus };
}

/**
 * `GET /healthz`: the process is up (liveness). `GET /readyz`: it can serve, its dependencies
 * answering (the database; Redis and LiveKit when configured): 200 with each one's status, or 503
 * `not_ready` naming those down (readiness: a load balancer sends no traffic meanwhile). Both outside
 * /api/v1 and without auth, like the probes that call them; not in the OpenAPI document (not part of
 * the tenants' API).
 */
export function registerHealth(app: App, services: Services): void {
  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/readyz', async (c) => {
    const dependencies = await checkDependencies(services);
    const down = Object.entries(dependencies)
      .filter(([, s]) => s === 'down')
      .map(([name]) => name);
    if (down.length === 0) return c.json({ ok: true, dependencies });
    return errorResponse(
      c,
      new ApiError('not_ready', `Not ready: ${down.join(', ')} ${down.length === 1 ? 'does' : 'do'} not answer`, {
        dependencies,
      }),
    );
  });
}
