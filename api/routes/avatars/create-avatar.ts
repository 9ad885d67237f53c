import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { FreeJsonObject } from '../../schemas/json.ts';
import {
  AVATAR_BODY_LIMIT,
  AvatarSchema,
  AvatarSettingsInput,
  DisplayName,
  toWire,
  MotionPromptInput,
  VoiceId,
} from './schemas.ts';

const CreateAvatarBody = z
  .object({
    displayName: DisplayName,
    sourceKind: z.literal('image').optional().openapi({ description: 'Creation is image-only.' }),
    sourceAssetId: z
      .string()
      .min(1)
      .max(160)
      .optional()
      .openapi({ description: 'A ready image asset of this workspace (the portrait).' }),
    motionPrompt: MotionPromptInput.optional(),
    voice: FreeJsonObject.nullable().optional(),
    defaultVoiceId: VoiceId.nullable().optional(),
    llm: FreeJsonObject.nullable().optional(),
    settings: AvatarSettingsInput.optional(),
    metadata: FreeJsonObject.optional(),
  })
  .strict()
  .openapi('CreateAvatarRequest');

export const route = createRoute({
  operationId: 'createAvatar',
  method: 'post',
  path: `${V1}/avatars`,
  tags: ['Avatars'],
  summary: 'Create an avatar',
  description:
    'With sourceAssetId the avatar starts `preprocessing` (idleVideoStatus `queued`) and its idle loop is generated in the background: poll GET /avatars/{avatarId} until `ready`. Without, it is a `draft`.',
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'application/json': { schema: CreateAvatarBody } } } },
  responses: {
    201: { description: 'The avatar', content: { 'application/json': { schema: AvatarSchema } } },
    ...errorResponses(400, 401, 403, 413, 415, 422, 503),
  },
});

export function register(app: App) {
  app.openapi(guarded(route, { bodyLimit: AVATAR_BODY_LIMIT }), async (c) => {
    const body = c.req.valid('json');
    const avatar = await c.get('services').avatars.create(c.get('principal'), body);
    return c.json(toWire(avatar), 201);
  });
}
