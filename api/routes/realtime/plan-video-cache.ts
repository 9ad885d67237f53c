import { createRoute } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { checkAvatarId } from '../avatars/schemas.ts';
import { VideoCachePlanAnswer, VideoCachePlanRequest } from './turn-schemas.ts';

export const route = createRoute({
  operationId: 'planVideoCache',
  method: 'post',
  path: `${V1}/realtime/video-cache/plan`,
  tags: ['Realtime'],
  summary: "Plan an avatar's frame caches at given settings",
  description:
    'The frame caches the realtime paths play, per clip (the idle loop `source` and every library clip with a frame cache), at the settings of its loop or the given overrides. ' +
    '`ready` when every entry exists; otherwise `queued`, the missing entries being made by background jobs (ask again). `manifest` lists the entries ready at these settings.',
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'application/json': { schema: VideoCachePlanRequest } } } },
  responses: {
    200: { description: 'The plan', content: { 'application/json': { schema: VideoCachePlanAnswer } } },
    ...errorResponses(400, 401, 403, 404, 413, 415, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const body = c.req.valid('json');
    const avatarId = checkAvatarId(body.avatar_id);
    return c.json(await c.get('services').videoCache.plan(c.get('principal'), avatarId, body.video_cache ?? {}), 200);
  });
}
