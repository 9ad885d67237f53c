import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { AvatarIdParam, checkAvatarId, CLIP_REVIEW_BODY_LIMIT } from './schemas.ts';

const ClipReviewBody = z
  .object({
    clipId: z.string().min(1).max(64).openapi({ description: 'The uploaded clip to accept.' }),
    uploadAssetId: z
      .string()
      .min(1)
      .max(64)
      .openapi({ description: "The clip's upload asset, as the clip library shows it (a changed source is 409)." }),
    expectedRevision: z
      .number()
      .int()
      .min(0)
      .max(2_147_483_647)
      .openapi({ description: "The clip library's current revision." }),
    expectedAnchorVersion: z
      .number()
      .int()
      .min(0)
      .max(2_147_483_647)
      .openapi({ description: "The clip library's current anchor version." }),
    reason: z
      .string()
      .min(5)
      .max(500)
      .openapi({ description: 'Why a person accepts the clip (5 to 500 characters); stored with the decision.' }),
  })
  .strict()
  .openapi('ClipReviewRequest');

export const route = createRoute({
  operationId: 'reviewClip',
  method: 'post',
  path: `${V1}/avatars/{avatarId}/clips/review`,
  tags: ['Avatars'],
  summary: 'Accept an uploaded clip after a human review',
  description:
    'Accepts an uploaded clip refused for its pose (poseCheck.verdict pose_mismatch) or still pending validation: the machine verdict is kept in poseCheck with ' +
    'review { reason, at, by } added, and the clip serves (ready). Other refusals (no face, invalid media, over 18 MB) stay refused: 409 avatar_state_conflict. ' +
    'A stale expectedRevision is 409 revision_conflict (currentRevision), a stale expectedAnchorVersion 409 avatar_state_conflict (currentAnchorVersion). Body cap 4 KiB.',
  security: [{ bearerAuth: [] }],
  request: {
    params: AvatarIdParam,
    body: { required: true, content: { 'application/json': { schema: ClipReviewBody } } },
  },
  responses: {
    204: { description: 'Accepted: the clip serves' },
    ...errorResponses(400, 401, 403, 404, 409, 413, 415, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route, { bodyLimit: CLIP_REVIEW_BODY_LIMIT }), async (c) => {
    const avatarId = checkAvatarId(c.req.valid('param').avatarId);
    const body = c.req.valid('json');
    await c.get('services').clipLibrary.review(c.get('principal'), avatarId, body);
    return c.body(null, 204);
  });
}
