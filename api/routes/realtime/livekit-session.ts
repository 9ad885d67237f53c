import { createRoute, z } from '@hono/zod-openapi';
import { ApiError } from '../../../core/platform/errors.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses, ErrorSchema } from '../../schemas/common.ts';
import {
  fromMintWire,
  GrantSchema,
  JOIN_PATH,
  MINT_BODY_LIMIT,
  MintBody,
  QueueTicketSchema,
  toGrantWire,
} from './livekit-schemas.ts';

export const route = createRoute({
  operationId: 'mintLiveSession',
  method: 'post',
  path: `${V1}/realtime/livekit/session`,
  tags: ['Realtime'],
  summary: 'Mint a live call on LiveKit',
  description:
    "Creates the call: a capacity slot, a credit reservation of max_duration_seconds, a LiveKit room (conversation mode) with the avatar agent dispatched into it, and the user's token. " +
    'Refusals, in this order, each with nothing reserved: 404 avatar, 409 avatar_state_conflict (not ready), scene (403 scene_sessions_not_enabled, 404 scene_not_found, 409 scene_not_ready, ' +
    '429 scene_concurrency_limit_reached), 403 recordings_not_enabled, 503 clip_library_not_ready, 402 credits, 429 concurrency_limit_reached, then capacity: 429 queue ' +
    '(exactly { queue_ticket_id, queue_size, recommended_retry_ms }), 503 capacity_unavailable, 503 session_dispatch_failed. ' +
    "clip_library, clip_behavior and choreography are refused like any unknown field: a call always plays the avatar's serving clips and declared behaviour. Body cap 64 KiB. " +
    'A workspace with allowedOrigins gets participant_token null, and join_token and join_url instead: the page redeems the token at POST /realtime/livekit/join.',
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'application/json': { schema: MintBody } } } },
  responses: {
    200: { description: 'The grant', content: { 'application/json': { schema: GrantSchema } } },
    ...errorResponses(400, 401, 402, 403, 404, 409, 413, 415, 422, 503),
    429: {
      description:
        'Capacity queue (no code: queue_ticket_id, queue_size, recommended_retry_ms), concurrency_limit_reached, scene_concurrency_limit_reached, or the per-key rate limit',
      content: { 'application/json': { schema: z.union([QueueTicketSchema, ErrorSchema]) } },
    },
  },
});

export function register(app: App) {
  app.openapi(guarded(route, { bodyLimit: MINT_BODY_LIMIT }), async (c) => {
    const body = c.req.valid('json');
    const { config, liveCalls } = c.get('services');
    const principal = c.get('principal');
    if (body.max_duration_seconds !== undefined && body.max_duration_seconds > config.LIVE_MAX_DURATION_SECONDS) {
      throw new ApiError(
        'validation_error',
        `Invalid field "max_duration_seconds" in body: at most ${config.LIVE_MAX_DURATION_SECONDS} on this server`,
        { field: 'max_duration_seconds' },
      );
    }
    const { grant, timing } = await liveCalls.mint(
      principal,
      fromMintWire(body, { maxDurationSeconds: config.LIVE_DEFAULT_MAX_DURATION_SECONDS }),
    );
    c.header(
      'Server-Timing',
      `own;dur=${timing.ownMs.toFixed(2)}, livekit-room;dur=${timing.roomMs.toFixed(2)}, livekit-dispatch;dur=${timing.dispatchMs.toFixed(2)}`,
    );
    return c.json(toGrantWire(grant, `${config.publicBaseUrl}${JOIN_PATH}`), 200);
  });
}
