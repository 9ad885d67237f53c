import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { AvatarSchema, toWire } from './schemas.ts';

export const route = createRoute({
  operationId: 'listAvatars',
  method: 'get',
  path: `${V1}/avatars`,
  tags: ['Avatars'],
  summary: 'List avatars',
  description: "The workspace's avatars, most recently updated first, at most 100. Deleted avatars are not listed.",
  security: [{ bearerAuth: [] }],
  responses: {
    200: {
      description: 'Avatars',
      content: { 'application/json': { schema: z.object({ data: z.array(AvatarSchema) }).openapi('AvatarList') } },
    },
    ...errorResponses(401, 403),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const data = await c.get('services').avatars.list(c.get('principal').tenantId);
    return c.json({ data: data.map(toWire) }, 200);
  });
}
