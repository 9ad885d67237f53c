import { createRoute } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { AvatarIdParam, checkAvatarId, ClipEnvelopeSchema } from './schemas.ts';

export const route = createRoute({
  operationId: 'getClipLibrary',
  method: 'get',
  path: `${V1}/avatars/{avatarId}/clips`,
  tags: ['Avatars'],
  summary: "Get an avatar's clip library",
  description:
    'The clip envelope: live clips (status is the job status, url the serving MP4), revision, anchor, behavior. Readable with the workspace switch off (clipLibraryEligible is then false).',
  security: [{ bearerAuth: [] }],
  request: { params: AvatarIdParam },
  responses: {
    200: { description: 'The clip library', content: { 'application/json': { schema: ClipEnvelopeSchema } } },
    ...errorResponses(401, 403, 404, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const avatarId = checkAvatarId(c.req.valid('param').avatarId);
    const envelope = await c.get('services').clipLibrary.envelope(c.get('principal').tenantId, avatarId);
    return c.json(envelope, 200);
  });
}
