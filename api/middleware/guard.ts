import type { RouteConfig } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { hasScope } from '../../core/auth/keys.ts';
import { ApiError } from '../../core/errors.ts';
import type { AppEnv } from '../context.ts';
import { ROUTE_SCOPES, type OperationId } from '../scopes.ts';

/** Default JSON body cap (spec section 8: 8 to 32 KiB on routes without a cap of their own). */
export const DEFAULT_BODY_LIMIT = 16 * 1024;

/** Verifies the key, applies the per-key throttle, then checks the operation's scope. */
export function authenticate(operationId: OperationId): MiddlewareHandler<AppEnv> {
  const scope = ROUTE_SCOPES[operationId];
  if (!scope) throw new Error(`Route ${operationId} has no entry in ROUTE_SCOPES`);
  return async (c, next) => {
    const { keys, rateLimiter, config, log } = c.get('services');
    const principal = await keys.verify(c.req.header('authorization'));
    let limit;
    try {
      limit = await rateLimiter.consume(principal.apiKeyId);
    } catch (err) {
      // The throttle protects the service; a coordination outage must not take the API down with it.
      log.error({ err }, 'rate limiter unavailable, request let through');
    }
    if (limit && !limit.allowed) {
      const seconds = Math.ceil(limit.retryAfterMs / 1000);
      throw new ApiError(
        'rate_limited',
        `Rate limit exceeded: ${config.RATE_LIMIT_POINTS} requests per ${config.RATE_LIMIT_WINDOW_SECONDS} seconds per API key. Retry after ${seconds} s`,
        {},
        { 'Retry-After': String(seconds) },
      );
    }
    if (!hasScope(principal.scopes, scope)) {
      throw new ApiError('forbidden', `This API key lacks the scope "${scope}": mint a key with that scope`, {
        requiredScope: scope,
      });
    }
    c.set('principal', principal);
    await next();
  };
}

/** Caps the request body while it is read (413), whatever Content-Length claims. */
export function capBody(maxBytes: number): MiddlewareHandler<AppEnv> {
  return bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new ApiError('payload_too_large', `Request body exceeds this route's cap of ${maxBytes} bytes: send media as an asset and reference its id`, {
        maxBytes,
      });
    },
  });
}

/**
 * Adds the guards every /api/v1 route runs, in order: authentication, throttle and scope (from
 * ROUTE_SCOPES by operationId), then the body cap. Returns the route config for `app.openapi`.
 */
export function guarded<R extends RouteConfig>(route: R, opts: { bodyLimit?: number } = {}): R {
  const middleware: MiddlewareHandler<AppEnv>[] = [authenticate(route.operationId as OperationId)];
  if (route.method !== 'get' && route.method !== 'delete') middleware.push(capBody(opts.bodyLimit ?? DEFAULT_BODY_LIMIT));
  return { ...route, middleware: middleware as never };
}
