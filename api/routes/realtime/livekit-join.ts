import { createRoute } from '@hono/zod-openapi';
import { cors } from 'hono/cors';
import type { App } from '../../context.ts';
import { keyless } from '../../middleware/guard.ts';
import { errorResponses, ErrorSchema } from '../../schemas/common.ts';
import { JOIN_BODY_LIMIT, JOIN_PATH, JoinAnswer, JoinBody, toJoinWire } from './livekit-schemas.ts';

export const route = createRoute({
  operationId: 'joinLiveSession',
  method: 'post',
  path: JOIN_PATH,
  tags: ['Realtime'],
  summary: 'Join a live call with a join token (from a web page of an allowed origin)',
  description:
    "No API key: the join token of a grant is the credential. A workspace with allowedOrigins gets grants without the LiveKit token (participant_token null) and with a join_token; the page posts it here, once, and gets the token. The request's Origin must be one of the workspace's allowed origins now. " +
    'Refusals: 422 (join_token), 403 origin_not_allowed (no Origin, or one not allowed; field Origin), 404 join_token_not_found, 410 join_token_used, 410 join_token_expired (expired, or the call has ended). ' +
    'Answers carry Access-Control-Allow-Origin (the request Origin) and Vary: Origin; the CORS preflight is answered (POST, content-type). Body cap 4 KiB.',
  request: { body: { required: true, content: { 'application/json': { schema: JoinBody } } } },
  responses: {
    200: {
      description: 'What the page joins the call with',
      content: { 'application/json': { schema: JoinAnswer } },
    },
    ...errorResponses(400, 403, 413, 415, 422),
    403: {
      description: 'origin_not_allowed: no Origin header, or one the workspace does not allow; or tenant_not_active',
      content: { 'application/json': { schema: ErrorSchema } },
    },
    404: {
      description: 'join_token_not_found: a token never issued (or purged)',
      content: { 'application/json': { schema: ErrorSchema } },
    },
    410: {
      description: 'join_token_used (redeemed already) or join_token_expired (past expires_at, or the call has ended)',
      content: { 'application/json': { schema: ErrorSchema } },
    },
  },
});

/**
 * Every answer names the request's origin in Access-Control-Allow-Origin: a success only ever goes
 * to an allowed origin (checked by the redemption), and a refusal must be readable by the page that
 * made it (the embed shows it). No credentials: the token in the body is the whole of it.
 */
const joinCors = cors({
  origin: (origin) => origin || null,
  allowMethods: ['POST'],
  allowHeaders: ['content-type'],
  maxAge: 600,
});

export function register(app: App) {
  // The preflight: the route itself answers POST only.
  app.options(JOIN_PATH, joinCors);
  app.openapi(keyless(route, { bodyLimit: JOIN_BODY_LIMIT, first: [joinCors] }), async (c) => {
    const { join_token } = c.req.valid('json');
    const joined = await c.get('services').liveCalls.join(join_token, c.req.header('origin'));
    return c.json(toJoinWire(joined), 200);
  });
}
