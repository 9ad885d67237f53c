import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { SceneSchema, toWire } from './schemas.ts';

const SceneIdParam = z.object({
  sceneId: z.string().openapi({
    param: { name: 'sceneId', in: 'path' },
    example: 'scn_5d41402abc4b2a76b9719d911017c592',
    description: 'Starts with scn_',
  }),
});

export const route = createRoute({
  operationId: 'getScene',
  method: 'get',
  path: `${V1}/scenes/{sceneId}`,
  tags: ['Realtime'],
  summary: 'Get a scene (preview)',
  description:
    "Build state of a scene the workspace prepared: building, ready (video_cache_id and frame counts for a mint) or failed (error). 404 scene_not_found for another workspace's id, an unknown one, or an expired scene.",
  security: [{ bearerAuth: [] }],
  request: { params: SceneIdParam },
  responses: {
    200: { description: 'The scene', content: { 'application/json': { schema: SceneSchema } } },
    ...errorResponses(401, 403, 404, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const scene = await c.get('services').scenes.get(c.get('principal').tenantId, c.req.valid('param').sceneId);
    return c.json(toWire(scene), 200);
  });
}
