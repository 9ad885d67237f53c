import { createRoute } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { AvatarIdParam, AvatarSchema, checkAvatarId, toWire } from './schemas.ts';

export const route = createRoute({
  operationId: 'getAvatar',
  method: 'get',
  path: `${V1}/avatars/{avatarId}`,
  tags: ['Avatars'],
  summary: 'Get an avatar',
  description: 'Includes status, idleVideoStatus (background generation progress), servingUrl and, when failed, error.',
  security: [{ bearerAuth: [] }],
  request: { params: AvatarIdParam },
  responses: {
    200: { description: 'The avatar', content: { 'application/json': { schema: AvatarSchema } } },
    ...errorResponses(401, 403, 404, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const avatarId = checkAvatarId(c.req.valid('param').avatarId);
    return c.json(toWire(await c.get('services').avatars.get(c.get('principal').tenantId, avatarId)), 200);
  });
}
