import { createRoute } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { checkAvatarId } from '../avatars/schemas.ts';
import { PrepareRealtimeAnswer, PrepareRealtimeRequest } from './turn-schemas.ts';

export const route = createRoute({
  operationId: 'prepareRealtime',
  method: 'post',
  path: `${V1}/realtime/prepare`,
  tags: ['Realtime'],
  summary: 'Prepare an avatar for turns',
  description:
    "Loads the avatar's idle loop (frame cache and per-frame face geometry) into this server's renderer and warms its voice, so the next turn starts fast. " +
    "Idempotent: a second prepare answers registered false. 402 when the workspace has no available credits (or the key's spend limit is used up); 409 when the avatar is not ready; 502 media_unavailable when its media cannot be loaded.",
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'application/json': { schema: PrepareRealtimeRequest } } } },
  responses: {
    200: { description: 'Prepared', content: { 'application/json': { schema: PrepareRealtimeAnswer } } },
    ...errorResponses(400, 401, 402, 403, 404, 409, 413, 415, 422, 502),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const avatarId = checkAvatarId(c.req.valid('json').avatar_id);
    return c.json(await c.get('services').turns.prepare(c.get('principal'), avatarId), 200);
  });
}
