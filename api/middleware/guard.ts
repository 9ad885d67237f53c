import type { HttpBindings } from '@hono/node-server';
import type { RouteConfig } from '@hono/zod-openapi';
import type { Context, MiddlewareHandler } from 'hono';
import { hasScope, type Scope } from '../../core/auth/keys.ts';
import type { Config } from '../../core/platform/config.ts';
import { ApiError } from '../../core/platform/errors.ts';
import { orAfter } from '../../core/platform/time.ts';
import { escapeInvalidUtf8 } from '../schemas/json.ts';
import type { AppEnv } from '../context.ts';
import { ROUTE_SCOPES, type OperationId } from '../scopes.ts';
import { dashboardSession, sessionPrincipal } from '../dashboard/session.ts';

/** Default JSON body cap of routes without a cap of their own (the API documents 8 to 32 KiB for those). */
export const DEFAULT_BODY_LIMIT = 16 * 1024;

/** The peer address of the connection; undefined for in-process requests (`app.request`), which no client sends. */
function peerAddress(c: Context<AppEnv>): string | undefined {
  return (c.env as Partial<HttpBindings> | undefined)?.incoming?.socket?.remoteAddress;
}

/** The 429 of a client address past its bound of failed authentications. */
function authFailuresExceeded(config: Config, retryAfterMs: number): ApiError {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return new ApiError(
    'rate_limited',
    `Too many failed authentications from this address: ${config.AUTH_FAILURE_LIMIT_POINTS} per ${config.AUTH_FAILURE_LIMIT_WINDOW_SECONDS} seconds. Check the API key, and retry after ${seconds} s`,
    {},
    { 'Retry-After': String(seconds) },
  );
}

/**
 * Verifies the key, applies the per-key throttle, then checks the operation's scope. A client
 * address past its bound of failed authentications is refused first, before any key lookup, unless
 * its key is one this process verified recently.
 */
export function authenticate(operationId: OperationId): MiddlewareHandler<AppEnv> {
  const scope: Scope | null | undefined = ROUTE_SCOPES[operationId];
  if (scope === undefined) throw new Error(`Route ${operationId} has no entry in ROUTE_SCOPES`);
  return async (c, next) => {
    const { keys, rateLimiter, authFailures, config, log } = c.get('services');
    const address = peerAddress(c);
    const authorization = c.req.header('authorization');
    const blockedMs = address ? authFailures.blockedFor(address) : 0;
    let principal;
    // A dashboard page (its session cookie, its anti-forgery header) when no key is presented.
    const session = authorization === undefined ? await dashboardSession(c) : undefined;
    if (session) principal = sessionPrincipal(session);
    else if (blockedMs > 0) {
      // Blocked: only a key this process verified recently passes (a client behind the same
      // address with a real key), checked without a query; anything else is the 429.
      principal = await keys.verifyCached(authorization).catch(() => undefined);
      if (!principal) throw authFailuresExceeded(config, blockedMs);
    } else {
      try {
        principal = await keys.verify(authorization);
      } catch (err) {
        if (address && err instanceof ApiError && err.code === 'unauthorized') {
          const nowBlockedMs = await authFailures.failed(address);
          if (nowBlockedMs > 0) throw authFailuresExceeded(config, nowBlockedMs);
        }
        throw err;
      }
    }
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
    if (scope !== null && !hasScope(principal.scopes, scope)) {
      throw new ApiError('forbidden', `This API key lacks the scope "${scope}": mint a key with that scope`, {
        requiredScope: scope,
      });
    }
    c.set('principal', principal);
    await next();
  };
}

/**
 * How much of an over-cap body is still read (and dropped) before the 413, and for how long: a
 * response sent while the rest of the body is on the wire leaves the keep-alive connection unusable
 * for the client's next request, so within these bounds the connection is emptied and stays open.
 * Past them the 413 says `Connection: close`, and no client reuses it.
 */
export const DRAIN_MAX_BYTES = 4 * 1024 * 1024;
const DRAIN_MAX_MS = 5_000;

/**
 * Reads and drops the rest of a body, up to `maxBytes` and `maxMs`. True when it reached its end,
 * false when a bound was hit first (what is left unread is then the connection's to discard).
 */
async function drainBody(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  maxBytes = DRAIN_MAX_BYTES,
  maxMs = DRAIN_MAX_MS,
): Promise<boolean> {
  const drained = (async () => {
    for (let read = 0; read <= maxBytes;) {
      const { done, value } = await reader.read();
      if (done) return true;
      read += value.length;
    }
    return false;
  })().catch(() => false);
  return orAfter(drained, maxMs, false);
}

/** The 413 of a body over `maxBytes`, after draining what is left of it (up to `drainBytes` more). */
async function tooLarge(
  maxBytes: number,
  rest: ReadableStreamDefaultReader<Uint8Array> | undefined,
  drainBytes = DRAIN_MAX_BYTES,
): Promise<ApiError> {
  const drained = rest ? await drainBody(rest, drainBytes) : false;
  return new ApiError(
    'payload_too_large',
    `Request body exceeds this route's cap of ${maxBytes} bytes: send media as an asset and reference its id`,
    { maxBytes },
    drained ? {} : { Connection: 'close' },
  );
}

/**
 * Caps the request body while it is read (413), whatever Content-Length claims. A declared length
 * within the cap is left to the parser (the body cannot exceed it); otherwise the body is read here,
 * counted, and handed on buffered.
 */
export function capBody(maxBytes: number): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const raw = c.req.raw;
    if (!raw.body) return next();
    const declared = raw.headers.has('transfer-encoding') ? undefined : raw.headers.get('content-length');
    if (declared != null) {
      const length = Number(declared);
      if (length <= maxBytes) return next();
      // Declared over the cap: drained (all of it, unread so far) only when within the drain bound.
      throw await tooLarge(maxBytes, length - maxBytes <= DRAIN_MAX_BYTES ? raw.body.getReader() : undefined, length);
    }
    const reader = raw.body.getReader();
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > maxBytes) throw await tooLarge(maxBytes, reader);
      chunks.push(value);
    }
    c.req.raw = new Request(raw, { body: Buffer.concat(chunks, size) });
    await next();
  };
}

/** The media types the JSON validator parses (hono's validator: application/json and any +json). */
const JSON_MEDIA_TYPE = /^application\/([\w.-]+\+)?json$/i;

/**
 * Reads a JSON body before the validator does, so that invalid UTF-8 in it is refused naming its
 * field (`escapeInvalidUtf8`) instead of being decoded to U+FFFD and stored. Valid bodies (the
 * common case) stay in the request's body cache, read once.
 */
function utf8JsonBody(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const mediaType = (c.req.header('content-type') ?? '').split(';')[0]!.trim();
    if (!c.req.raw.body || !JSON_MEDIA_TYPE.test(mediaType)) return next();
    const escaped = escapeInvalidUtf8(new Uint8Array(await c.req.arrayBuffer()));
    if (escaped) {
      delete c.req.bodyCache.arrayBuffer;
      c.req.raw = new Request(c.req.raw, { body: escaped });
    }
    await next();
  };
}

/**
 * Adds the guards every /api/v1 route runs, in order: authentication, throttle and scope (from
 * ROUTE_SCOPES by operationId), then the body cap and, for a JSON body, its UTF-8 check. Returns
 * the route config for `app.openapi`.
 */
export function guarded<R extends RouteConfig>(route: R, opts: { bodyLimit?: number } = {}): R {
  const middleware = [authenticate(route.operationId as OperationId), ...bodyGuards(route, opts)];
  return { ...route, middleware: middleware as never };
}

/** The body cap and, for a JSON body, its UTF-8 check. */
function bodyGuards(route: RouteConfig, opts: { bodyLimit?: number }): MiddlewareHandler<AppEnv>[] {
  const middleware: MiddlewareHandler<AppEnv>[] = [];
  if (route.method !== 'get' && route.method !== 'delete')
    middleware.push(capBody(opts.bodyLimit ?? DEFAULT_BODY_LIMIT));
  if (route.request?.body?.content && 'application/json' in route.request.body.content) middleware.push(utf8JsonBody());
  return middleware;
}

/**
 * The guards of a route whose credential is in its body, not an API key (POST
 * /realtime/livekit/join): no authentication and no scope, only `first`, then the body guards.
 */
export function keyless<R extends RouteConfig>(
  route: R,
  opts: { bodyLimit?: number; first?: MiddlewareHandler<AppEnv>[] } = {},
): R {
  const middleware = [...(opts.first ?? []), ...bodyGuards(route, opts)];
  return { ...route, middleware: middleware as never };
}
