import type { MiddlewareHandler } from 'hono';
import { newRequestId } from '../../core/ids.ts';
import type { Services } from '../../core/services.ts';
import type { AppEnv } from '../context.ts';

/**
 * First on every request: a server-generated request id (header X-Request-ID and, on errors, the
 * body), `Cache-Control: no-store` and the services. Handlers log through `services.log` with the
 * requestId as a field: no per-request child logger on the hot path.
 */
export function requestContext(services: Services): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const requestId = newRequestId();
    c.set('services', services);
    c.set('requestId', requestId);
    c.header('X-Request-ID', requestId);
    c.header('Cache-Control', 'no-store');
    await next();
    // Responses built outside c.json (streams, files) still get both headers.
    if (!c.res.headers.has('X-Request-ID')) {
      try {
        c.res.headers.set('X-Request-ID', requestId);
        c.res.headers.set('Cache-Control', 'no-store');
      } catch {
        /* immutable headers: the response was built with them already */
      }
    }
  };
}
