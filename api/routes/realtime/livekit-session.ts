import { createRoute, z } from '@hono/zod-openapi';
import { ApiError } from '../../../core/platform/errors.ts';
import { DEFAULT_POOL } from '../../../core/live/capacity.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses, ErrorSchema } from '../../schemas/common.ts';
import { checkAvatarId } from '../avatars/schemas.ts';
import {
  CapacityPoolName,
  GrantSchema,
  MINT_BODY_LIMIT,
  QueueTicketId,
  QueueTicketSchema,
  toGrantWire,
} from './livekit-schemas.ts';

const Identity = z.string().regex(/^[A-Za-z0-9_.:@-]{1,128}$/, 'must be 1 to 128 letters, digits, _ . : @ or -');

const MintBody = z
  .object({
    avatar_id: z
      .string()
      .min(1)
      .max(128)
      .openapi({ description: 'A ready avatar of the workspace.', example: 'ava_0123456789ABCDEFGHij' }),
    capacity_pool: CapacityPoolName.optional(),
    client_metadata: z
      .object({
        user_id: z
          .string()
          .min(1)
          .max(256)
          .optional()
          .openapi({ description: 'Your end user: GET /usage/sessions?endUserId= narrows to it.' }),
      })
      .strict()
      .optional(),
    scene: z
      .object({
        video_cache_id: z
          .string()
          .min(1)
          .max(128)
          .openapi({ description: 'The video_cache_id of a ready scene of the workspace.' }),
      })
      .strict()
      .optional()
      .openapi({
        description: "Play a scene instead of the avatar's idle clips (the avatar's voice and persona stay).",
      }),
    queue_ticket_id: QueueTicketId.optional().openapi({
      description: 'The ticket of an earlier capacity 429: keeps your place in the queue.',
    }),
    max_duration_seconds: z.number().int().min(1).max(86_400).optional().openapi({
      description:
        'Longest the call may run; reserved up front (1 s = 1,000,000 credit micros) and capped by the credits available. Default 600, at most the server limit (14,400 by default).',
    }),
    record: z.boolean().optional().openapi({
      description:
        "Record the call. Omitted: recorded when the workspace's recording policy is on. true while the policy is off: 403 recordings_not_enabled.",
    }),
    room: z
      .object({
        name: z
          .string()
          .regex(
            /^(?!avatar-ses_)[A-Za-z0-9_.:@-]{1,128}$/,
            'must be 1 to 128 letters, digits, _ . : @ or -, and not start with avatar-ses_ (the names of our own call rooms)',
          )
          .openapi({ description: 'Your existing LiveKit room.' }),
        agent_identity: Identity.openapi({
          description: 'The identity of your agent in that room: the avatar speaks for it.',
        }),
      })
      .strict()
      .optional()
      .openapi({
        description:
          'Provider mode: the avatar joins your existing room for your own agent. No room is created and no user token is minted.',
      }),
  })
  .strict()
  .openapi('LiveSessionMintRequest');

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
    "clip_library, clip_behavior and choreography are refused like any unknown field: a call always plays the avatar's serving clips and declared behaviour. Body cap 64 KiB.",
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
    const { grant, timing } = await liveCalls.mint(principal, {
      avatarId: checkAvatarId(body.avatar_id),
      capacityPool: body.capacity_pool ?? DEFAULT_POOL,
      endUserId: body.client_metadata?.user_id,
      videoCacheId: body.scene?.video_cache_id,
      queueTicketId: body.queue_ticket_id,
      maxDurationSeconds: body.max_duration_seconds ?? config.LIVE_DEFAULT_MAX_DURATION_SECONDS,
      record: body.record,
      room: body.room && { name: body.room.name, agentIdentity: body.room.agent_identity },
    });
    c.header(
      'Server-Timing',
      `own;dur=${timing.ownMs.toFixed(2)}, livekit-room;dur=${timing.roomMs.toFixed(2)}, livekit-dispatch;dur=${timing.dispatchMs.toFixed(2)}`,
    );
    return c.json(toGrantWire(grant), 200);
  });
}
