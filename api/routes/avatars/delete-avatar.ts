import { createRoute } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { AvatarIdParam, checkAvatarId } from './schemas.ts';

export const route = createRoute({
  operationId: 'deleteAvatar',
  method: 'delete',
  path: `${V1}/avatars/{avatarId}`,
  tags: ['Avatars'],
  summary: 'Delete an avatar',
  description: 'Soft delete: the avatar is gone from every read and write (404) from then on.',
  security: [{ bearerAuth: [] }],
  request: { params: AvatarIdParam },
  responses: {
    204: { description: 'Deleted' },
    ...errorResponses(401, 403, 404, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const avatarId = checkAvatarId(c.req.valid('param').avatarId);
    await c.get('services').avatars.remove(c.get('principal'), avatarId);
    return c.body(null, 204);
  });
}
