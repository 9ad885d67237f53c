import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import {
  fromReleaseWire,
  LeftQueue,
  RELEASE_BODY_LIMIT,
  ReleaseBody,
  ReleasedSession,
  toReleaseWire,
} from './livekit-schemas.ts';

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
    const out = await c.get('services').liveCalls.release(c.get('principal'), fromReleaseWire(body));
    return c.json(toReleaseWire(out), 200);
  });
}
