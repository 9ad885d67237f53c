import { createRoute, z } from '@hono/zod-openapi';
import { RELEASE_REASONS } from '../../../core/live/calls.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import {
  CapacityPoolName,
  LeftQueue,
  QueueTicketId,
  RELEASE_BODY_LIMIT,
  ReleasedSession,
  SessionId,
  toReleaseWire,
} from './livekit-schemas.ts';

const ReleaseBody = z
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

export const route = createRoute({
  operationId: 'releaseLiveSession',
  method: 'post',
  path: `${V1}/realtime/livekit/session/release`,
  tags: ['Realtime'],
  summary: 'End a live call, or leave the capacity queue',
  description:
    'Free of charge and idempotent: twice, or on a call that already ended, it answers the recorded end again. The call is billed what ran, as any end. ' +
    "A conversation call's room is deleted; a provider call's room is yours and stays (the avatar leaves it). Another workspace's id is 404. Body cap 4 KiB.",
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'application/json': { schema: ReleaseBody } } } },
  responses: {
    200: {
      description: 'Ended (or already ended), or out of the queue',
      content: { 'application/json': { schema: z.union([ReleasedSession, LeftQueue]) } },
    },
    ...errorResponses(400, 401, 403, 404, 413, 415, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route, { bodyLimit: RELEASE_BODY_LIMIT }), async (c) => {
    const body = c.req.valid('json');
    const out = await c.get('services').liveCalls.release(c.get('principal'), {
      sessionId: body.session_id,
      ticketId: body.queue_ticket_id,
      reason: body.reason,
    });
    return c.json(toReleaseWire(out), 200);
  });
}
