import type { HttpBindings } from '@hono/node-server';
import type { MiddlewareHandler } from 'hono';
import { newRequestId } from '../../core/platform/ids.ts';
import type { Services } from '../../core/wiring/services.ts';
import type { AppEnv } from '../context.ts';

/**
 * First on every request: a server-generated request id (header X-Request-ID and, on errors, the
 * body), `Cache-Control: no-store` and the services. Handlers log through `services.log` with the
 * requestId as a field: no per-request child logger on the hot path.
 *
 * Under the Node server the two headers go straight onto Node's response: they then reach every
 * answer (JSON, streams, files) and Hono keeps its allocation-free response path, which a
 * per-request `Headers` object would defeat (measured: about a quarter of the API's CPU per request).
 */
export function requestContext(services: Services): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const requestId = newRequestId();
    c.set('services', services);
    c.set('requestId', requestId);
    const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
    if (outgoing) {
      outgoing.setHeader('X-Request-ID', requestId);
      outgoing.setHeader('Cache-Control', 'no-store');
    } else {
      // In-process requests (app.request in tests): no Node response to write to.
      c.header('X-Request-ID', requestId);
      c.header('Cache-Control', 'no-store');
    }
    await next();
  };
}
