import { z } from '@hono/zod-openapi';
import type { Grant, ReleaseOutcome } from '../../../core/live/calls.ts';
import { POOL_NAME, type PoolSnapshot } from '../../../core/live/capacity.ts';
import { Timestamp } from '../../schemas/common.ts';

/** Body caps of the live-call routes. */
export const MINT_BODY_LIMIT = 64 * 1024;
export const RELEASE_BODY_LIMIT = 4 * 1024;

export const CapacityPoolName = z
  .string()
  .regex(POOL_NAME, 'must be 1 to 64 lowercase letters, digits, _ or -, starting with a letter or digit')
  .openapi({ example: 'primary', description: 'A capacity pool (default `primary`).' });

/** A queue ticket id as issued (qtk_...); anything else is no ticket of ours. */
export const QueueTicketId = z.string().min(1).max(128).openapi({ example: 'qtk_0123456789ABCDEFGHij' });
export const SessionId = z.string().min(1).max(128).openapi({ example: 'ses_0123456789ABCDEFGHij' });

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
      description: "The user's LiveKit token (join, publish the microphone, subscribe, data). Null in provider mode.",
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

/** A mint's grant on the wire. */
export const toGrantWire = (g: Grant): z.infer<typeof GrantSchema> => ({
  session_id: g.sessionId,
  room_name: g.roomName,
  server_url: g.serverUrl,
  participant_token: g.participantToken,
  participant_identity: g.participantIdentity,
  avatar_identity: g.avatarIdentity,
  capacity_pool: g.capacityPool,
  expires_at: g.expiresAt,
  max_duration_seconds: g.maxDurationSeconds,
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
