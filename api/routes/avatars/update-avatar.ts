import { createRoute, z } from '@hono/zod-openapi';
import { PROFILE_LIMITS, SESSION_INSTRUCTIONS_MAX } from '../../../core/avatars/index.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { FreeJsonObject } from '../../schemas/json.ts';
import {
  AVATAR_BODY_LIMIT,
  AvatarIdParam,
  AvatarSchema,
  AvatarSettingsInput,
  checkAvatarId,
  DisplayName,
  MotionPromptInput,
  toWire,
  utf16Max,
  VoiceId,
} from './schemas.ts';

const text = (max: number, what: string) =>
  utf16Max(z.string(), max)
    .nullable()
    .optional()
    .openapi({ description: `${what}. At most ${max} UTF-16 code units; null clears it.` });

const UpdateAvatarBody = z
  .object({
    displayName: DisplayName.optional(),
    defaultVoiceId: VoiceId.nullable().optional(),
    voice: FreeJsonObject.nullable().optional(),
    llm: FreeJsonObject.nullable().optional(),
    settings: AvatarSettingsInput.optional(),
    metadata: FreeJsonObject.optional(),
    motionPrompt: MotionPromptInput.nullable().optional(),
    personality: text(PROFILE_LIMITS.personality, 'Who the avatar is (session instructions)'),
    background: text(PROFILE_LIMITS.background, 'What the avatar knows (session instructions)'),
    artDirection: text(
      PROFILE_LIMITS.artDirection,
      'How the avatar looks and moves (not part of the session instructions)',
    ),
    replyStyle: text(PROFILE_LIMITS.replyStyle, 'How the avatar answers (session instructions)'),
    portraitUrl: z.string().max(4096).nullable().optional().openapi({
      description: 'Not supported over this API: always 400 portrait_url_not_supported.',
      deprecated: true,
    }),
    sourceAssetId: z.string().min(1).max(160).optional().openapi({
      description:
        'Portrait swap: a ready image asset. Exclusive of every other field but anchorTimeMs and sourceReview.',
    }),
    anchorTimeMs: z
      .number()
      .int()
      .min(0)
      .max(86_400_000)
      .optional()
      .openapi({ description: "The new source's anchor frame (swap only; 0 for an image)." }),
    sourceReview: z
      .object({ reason: z.string().trim().min(5).max(500) })
      .strict()
      .optional()
      .openapi({
        description:
          'A person reviewed and accepted the new source: failing automated checks are recorded but no longer refuse the swap.',
      }),
  })
  .strict()
  .refine((b) => Object.keys(b).length > 0, 'at least one field is required')
  .openapi('UpdateAvatarRequest', { minProperties: 1 });

export const route = createRoute({
  operationId: 'updateAvatar',
  method: 'patch',
  path: `${V1}/avatars/{avatarId}`,
  tags: ['Avatars'],
  summary: 'Update an avatar',
  description:
    `Partial update, at least one field. The merged session instructions (template in docs/avatars.md) must fit ${SESSION_INSTRUCTIONS_MAX} characters, else 422 before anything is saved. ` +
    'A portrait swap (sourceAssetId) runs the automated source checks, records them, and re-queues generation.',
  security: [{ bearerAuth: [] }],
  request: {
    params: AvatarIdParam,
    body: { required: true, content: { 'application/json': { schema: UpdateAvatarBody } } },
  },
  responses: {
    200: { description: 'The avatar', content: { 'application/json': { schema: AvatarSchema } } },
    ...errorResponses(400, 401, 403, 404, 409, 413, 415, 422, 503),
  },
});

export function register(app: App) {
  app.openapi(guarded(route, { bodyLimit: AVATAR_BODY_LIMIT }), async (c) => {
    const avatarId = checkAvatarId(c.req.valid('param').avatarId);
    const avatar = await c.get('services').avatars.update(c.get('principal'), avatarId, c.req.valid('json'));
    return c.json(toWire(avatar), 200);
  });
}
