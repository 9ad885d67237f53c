import type { HttpBindings } from '@hono/node-server';
import { OpenAPIHono } from '@hono/zod-openapi';
import { ApiError } from '../core/platform/errors.ts';
import type { Services } from '../core/wiring/services.ts';
import { V1, type AppEnv } from './context.ts';
import { errorResponse, toApiError, validationHook } from './errors.ts';
import { registerHealth } from './health.ts';
import { bodyCutOff } from './http-answer.ts';
import { apiMetrics } from './metrics.ts';
import { requestContext } from './middleware/request-context.ts';
import { KEYLESS_ROUTES, ROUTES } from './routes/index.ts';
import { registerDashboard } from './dashboard/routes.ts';
import { registerMedia } from './routes/media/serve-media.ts';
import { registerLiveKitWebhooks } from './routes/webhooks/livekit.ts';

const API_VERSION = '1.0.0';

/** OpenAPI "/a/{id}/b" to a matcher of concrete paths. */
function pathMatcher(path: string): RegExp {
  return new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}/?$`);
}

/** Registers every /api/v1 route and the security scheme: what /openapi.json describes. */
function describeApi(app: OpenAPIHono<AppEnv>): void {
  for (const m of [...ROUTES, ...KEYLESS_ROUTES]) m.register(app);
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    description: 'A service API key: svc_<keyId>_<secret>',
  });
}

/** The document's top-level fields, with the origin clients call. */
function documentConfig(serverUrl: string) {
  return {
    openapi: '3.1.0',
    info: { title: 'Avatar Realtime Service', version: API_VERSION },
    servers: [{ url: serverUrl }],
  };
}

/**
 * The OpenAPI 3.1 document the app serves at /openapi.json, built without services (nothing runs):
 * what `npm run client:types` generates the client library's types from.
 */
export function openApiDocument(serverUrl: string) {
  const app = new OpenAPIHono<AppEnv>();
  describeApi(app);
  return app.getOpenAPI31Document(documentConfig(serverUrl));
}

export function createApp(services: Services) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook as never });
  // First: its time covers every other middleware (auth, throttle) and the handler.
  app.use('*', apiMetrics(services));
  app.use('*', requestContext(services));

  describeApi(app);
  // Local media (signed URLs, outside /api/v1: the signature is the auth).
  registerMedia(app);
  // LiveKit's webhooks (outside /api/v1: LiveKit's signature is the auth).
  registerLiveKitWebhooks(app);
  // The dashboard's pages and its own calls (outside /api/v1: its session cookie is the auth).
  registerDashboard(app);
  app.doc31('/openapi.json', documentConfig(services.config.publicBaseUrl));
  registerHealth(app, services);

  const known = [...ROUTES, ...KEYLESS_ROUTES].map((m) => ({
    method: m.route.method.toUpperCase(),
    match: pathMatcher(m.route.path),
  }));
  app.notFound((c) => {
    const allowed = known.filter((k) => k.match.test(c.req.path)).map((k) => k.method);
    if (allowed.length > 0) {
      return errorResponse(
        c,
        new ApiError(
          'method_not_allowed',
          `Method ${c.req.method} is not allowed here: use ${allowed.join(', ')}`,
          {},
          { Allow: allowed.join(', ') },
        ),
      );
    }
    const hint = c.req.path.startsWith(V1) ? '' : ` (every endpoint lives under ${V1})`;
    return errorResponse(c, new ApiError('not_found', `No route ${c.req.method} ${c.req.path}${hint}`));
  });

  app.onError((err, c) => {
    // A body cut short fails whatever was reading it (a parser, a stream to storage): not a failure
    // here. The client hung up (logged at info), or the server gave up on a stalled body and has
    // answered already (api/server.ts). Either way this answer reaches no one.
    const cut = bodyCutOff((c.env as Partial<HttpBindings> | undefined)?.incoming);
    if (cut) {
      if (cut === 'client')
        services.log.info({ requestId: c.get('requestId'), method: c.req.method, path: c.req.path }, 'request aborted');
      return errorResponse(
        c,
        new ApiError('request_aborted', 'Request aborted: the connection closed before the request arrived in full'),
      );
    }
    const apiError = toApiError(err);
    const where = { requestId: c.get('requestId'), path: c.req.path };
    // A failure the code expected and answered (a remote that cannot be reached, a render that
    // failed) is the operator's to notice, not a bug: a warning with its code and reason, no trace.
    // Anything else is a bug: an error, with its stack.
    if (apiError.status >= 500) {
      if (err instanceof ApiError && err.code !== 'internal_error')
        services.log.warn({ ...where, code: err.code, reason: err.message }, 'request failed upstream');
      else services.log.error({ err, ...where }, 'request failed');
    }
    return errorResponse(c, apiError);
  });
  return app;
}
