import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { withIdempotency } from '../../idempotency.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses, IdempotencyKeyHeader } from '../../schemas/common.ts';
import { AvatarIdParam, AvatarSchema, checkAvatarId, MotionPromptInput, toWire, type AvatarWire } from './schemas.ts';

const RedirectLoopBody = z.object({ motionPrompt: MotionPromptInput }).strict().openapi('RedirectLoopRequest');

export const route = createRoute({
  operationId: 'redirectAvatarLoop',
  method: 'put',
  path: `${V1}/avatars/{avatarId}/loop`,
  tags: ['Avatars'],
  summary: 'Re-direct the idle loop',
  description:
    'Re-renders the idle loop from a new motionPrompt, billed as one generation. Answers 202 at once; the previous loop keeps serving as servingUrl until the new one publishes. Honours Idempotency-Key (replay returns the stored 202).',
  security: [{ bearerAuth: [] }],
  request: {
    params: AvatarIdParam,
    headers: IdempotencyKeyHeader,
    body: { required: true, content: { 'application/json': { schema: RedirectLoopBody } } },
  },
  responses: {
    202: {
      description: 'Accepted: the avatar, still serving its previous loop',
      content: { 'application/json': { schema: AvatarSchema } },
    },
    ...errorResponses(400, 401, 402, 403, 404, 409, 413, 415, 422, 503),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const avatarId = checkAvatarId(c.req.valid('param').avatarId);
    const { motionPrompt } = c.req.valid('json');
    const principal = c.get('principal');
    const avatar = await withIdempotency(
      c,
      {
        scope: 'PUT /avatars/{avatarId}/loop',
        request: { avatarId, motionPrompt },
        replay: (stored) => stored.body as AvatarWire,
      },
      async (settle) => {
        const answer = toWire(await c.get('services').avatars.redirectLoop(principal, avatarId, motionPrompt));
        await settle({ status: 202, body: answer });
        return answer;
      },
    );
    return c.json(avatar, 202);
  });
}
