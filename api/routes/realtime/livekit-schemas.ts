import { z } from '@hono/zod-openapi';
import {
  RELEASE_REASONS,
  type Grant,
  type JoinGrant,
  type MintInput,
  type ReleaseInput,
  type ReleaseOutcome,
} from '../../../core/live/calls.ts';
import { DEFAULT_POOL, POOL_NAME, type PoolSnapshot } from '../../../core/live/capacity.ts';
import { V1 } from '../../context.ts';
import { Timestamp } from '../../schemas/common.ts';
import { checkAvatarId } from '../avatars/schemas.ts';

/** Body caps of the live-call routes. */
export const MINT_BODY_LIMIT = 64 * 1024;
export const RELEASE_BODY_LIMIT = 4 * 1024;

export const CapacityPoolName = z
  .string()
  .regex(POOL_NAME, 'must be 1 to 64 lowercase letters, digits, _ or -, starting with a letter or digit')
  .openapi({ example: 'primary', description: 'A capacity pool (default `primary`).' });

/** A queue ticket id as issued (qtk_...); anything else is no ticket of ours. */
const QueueTicketId = z.string().min(1).max(128).openapi({ example: 'qtk_0123456789ABCDEFGHij' });
const SessionId = z.string().min(1).max(128).openapi({ example: 'ses_0123456789ABCDEFGHij' });

const Identity = z.string().regex(/^[A-Za-z0-9_.:@-]{1,128}$/, 'must be 1 to 128 letters, digits, _ . : @ or -');

export const MintBody = z
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

/** A mint's request as core takes it: the defaults filled in, the avatar id checked (404 when it names no avatar). */
export const fromMintWire = (body: z.infer<typeof MintBody>, defaults: { maxDurationSeconds: number }): MintInput => ({
  avatarId: checkAvatarId(body.avatar_id),
  capacityPool: body.capacity_pool ?? DEFAULT_POOL,
  endUserId: body.client_metadata?.user_id,
  videoCacheId: body.scene?.video_cache_id,
  queueTicketId: body.queue_ticket_id,
  maxDurationSeconds: body.max_duration_seconds ?? defaults.maxDurationSeconds,
  record: body.record,
  room: body.room && { name: body.room.name, agentIdentity: body.room.agent_identity },
});

/** The capacity-queue 429: exactly these fields (the request id is in the X-Request-ID header only). */
export const QueueTicketSchema = z
  .object({
    queue_ticket_id: z
      .string()
      .openapi({ description: 'Send it back as queue_ticket_id on the next mint to keep your place.' }),
    queue_size: z
      .number()
      .int()
      .openapi({ description: 'Queued mints up to and including this one: your position, 1 being next in line.' }),
    recommended_retry_ms: z.number().int().openapi({
      description: 'Mint again (with the ticket) after this long; a ticket not sent back in time leaves the queue.',
    }),
  })
  .strict()
  .openapi('LiveCapacityQueued', {
    description: 'Capacity is full: the request is queued. Not an error body: it has no `code`.',
  });

export const GrantSchema = z
  .object({
    session_id: z.string().openapi({ description: 'The call (and its usage row): ses_...' }),
    room_name: z.string(),
    server_url: z.string().openapi({ description: 'The LiveKit server to connect to.' }),
    participant_token: z.string().nullable().openapi({
      description:
        "The user's LiveKit token (join, publish the microphone, subscribe, data). Null in provider mode, and when the workspace limits its calls to allowed origins: the page then redeems join_token at join_url.",
    }),
    join_token: z.string().optional().openapi({
      description:
        'Only when the workspace has allowedOrigins: single use, expires with the grant (expires_at). A page of an allowed origin POSTs { join_token } to join_url for the LiveKit token.',
      example: 'sjt_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG',
    }),
    join_url: z.string().optional().openapi({
      description: 'Only with join_token: the absolute URL of POST /api/v1/realtime/livekit/join on this server.',
    }),
    participant_identity: z
      .string()
      .nullable()
      .openapi({ description: "The user's identity in the room. Null in provider mode." }),
    avatar_identity: z.string().openapi({ description: 'The identity the avatar joins with.' }),
    capacity_pool: z
      .string()
      .openapi({ description: 'The pool the call runs in (another than the asked one after a failover).' }),
    expires_at: Timestamp.openapi({
      description: 'Join before this time: the token expires then (a connected call goes on).',
    }),
    max_duration_seconds: z
      .number()
      .int()
      .openapi({ description: 'What the reservation pays for: the call ends at this length.' }),
  })
  .openapi('LiveSessionGrant');

/** A mint's grant on the wire (`joinUrl`: where its join token, if any, is redeemed). */
export const toGrantWire = (g: Grant, joinUrl: string): z.infer<typeof GrantSchema> => ({
  session_id: g.sessionId,
  room_name: g.roomName,
  server_url: g.serverUrl,
  participant_token: g.participantToken,
  ...(g.joinToken ? { join_token: g.joinToken, join_url: joinUrl } : {}),
  participant_identity: g.participantIdentity,
  avatar_identity: g.avatarIdentity,
  capacity_pool: g.capacityPool,
  expires_at: g.expiresAt,
  max_duration_seconds: g.maxDurationSeconds,
});

export const JOIN_BODY_LIMIT = 4 * 1024;
export const JOIN_PATH = `${V1}/realtime/livekit/join`;

export const JoinBody = z
  .object({
    join_token: z
      .string()
      .min(1)
      .max(256)
      .openapi({ description: "The grant's join_token.", example: 'sjt_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG' }),
  })
  .strict()
  .openapi('LiveSessionJoinRequest');

export const JoinAnswer = z
  .object({
    session_id: z.string(),
    server_url: z.string().openapi({ description: 'The LiveKit server to connect to.' }),
    participant_token: z
      .string()
      .openapi({ description: "The user's LiveKit token, as a mint would have answered it." }),
    avatar_identity: z.string(),
  })
  .openapi('LiveSessionJoin');

/** A redeemed join token on the wire. */
export const toJoinWire = (j: JoinGrant): z.infer<typeof JoinAnswer> => ({
  session_id: j.sessionId,
  server_url: j.serverUrl,
  participant_token: j.participantToken,
  avatar_identity: j.avatarIdentity,
});

export const ReleaseBody = z
  .object({
    session_id: SessionId.optional().openapi({
      description: 'The call to end. Send exactly one of session_id and queue_ticket_id.',
    }),
    queue_ticket_id: QueueTicketId.optional().openapi({ description: 'A queue ticket to take out of its queue.' }),
    reason: z.enum(RELEASE_REASONS).optional().openapi({
      description:
        'Why the client ends the call (recorded as its end reason; default released). Any other value is 422 and frees nothing.',
    }),
    capacity_pool: CapacityPoolName.optional().openapi({
      description: 'Accepted for clients that send it; the pool is known from the id.',
    }),
  })
  .strict()
  .superRefine((b, ctx) => {
    if ((b.session_id === undefined) === (b.queue_ticket_id === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: [b.session_id === undefined ? 'session_id' : 'queue_ticket_id'],
        message: 'send exactly one of session_id and queue_ticket_id',
      });
    }
  })
  .openapi('LiveSessionReleaseRequest');

/** A release's request as core takes it. */
export const fromReleaseWire = (body: z.infer<typeof ReleaseBody>): ReleaseInput => ({
  sessionId: body.session_id,
  ticketId: body.queue_ticket_id,
  reason: body.reason,
});

export const ReleasedSession = z
  .object({
    session_id: z.string(),
    state: z.literal('ended'),
    end_reason: z.string().openapi({
      description:
        'Why the call ended: the release reason, or what ended it first (user_left, room_finished, max_duration, worker_lost, failed, ...).',
    }),
    ended_at: Timestamp,
    usage_status: z
      .enum(['released', 'failed', 'reserved', 'started'])
      .openapi({ description: 'The usage row: released (billed what ran), failed (never started, 0).' }),
    billed_credit_micros: z.number().int(),
    capacity_pool: z.string(),
  })
  .openapi('LiveSessionReleased');

export const LeftQueue = z
  .object({
    queue_ticket_id: z.string(),
    state: z.literal('left_queue'),
    capacity_pool: z.string(),
  })
  .openapi('LiveQueueLeft');

/** A release's outcome on the wire: the ended call, or the ticket out of its queue. */
export const toReleaseWire = (out: ReleaseOutcome): z.infer<typeof ReleasedSession> | z.infer<typeof LeftQueue> =>
  out.kind === 'ticket'
    ? { queue_ticket_id: out.ticketId, state: 'left_queue', capacity_pool: out.capacityPool }
    : {
        session_id: out.sessionId,
        state: 'ended',
        end_reason: out.endReason,
        ended_at: out.endedAt,
        usage_status: out.status,
        billed_credit_micros: out.billedCreditMicros,
        capacity_pool: out.capacityPool,
      };

export const CapacitySchema = z
  .object({
    capacity_pool: z.string(),
    slots: z.number().int().openapi({
      description: "The pool's calls at once: the operator's count, else what its live agent workers declare.",
    }),
    in_use: z.number().int(),
    available: z.number().int().openapi({ description: 'max(0, slots - in_use).' }),
    queue_size: z.number().int().openapi({ description: 'Mints queued for the pool.' }),
    workers: z.number().int().openapi({ description: 'Live agent workers serving the pool.' }),
  })
  .openapi('LiveCapacity');

/** A pool's capacity on the wire. */
export const toCapacityWire = (s: PoolSnapshot): z.infer<typeof CapacitySchema> => ({
  capacity_pool: s.pool,
  slots: s.slots,
  in_use: s.inUse,
  available: Math.max(0, s.slots - s.inUse),
  queue_size: s.queueSize,
  workers: s.workers,
});
