import { createRoute, z } from '@hono/zod-openapi';
import { SCENE_CONTINUATIONS, SCENE_PROFILES } from '../../../core/scenes/types.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { SceneSchema, toWire } from './schemas.ts';

const SceneSource = z
  .object({
    url: z.string().min(1).max(2048).openapi({
      format: 'uri',
      description: 'http or https; must reach a public address (redirects included, each checked).',
    }),
    md5: z
      .string()
      .regex(/^[0-9a-fA-F]{32}$/, 'must be 32 hexadecimal digits')
      .optional()
      .openapi({
        description:
          'md5 of the clip (hex). With bytes: the id is known at once, and a clip already prepared answers ready at once.',
      }),
    bytes: z.number().int().min(1).optional().openapi({
      description: 'Byte length of the clip, at most the server cap (SCENE_MAX_BYTES, 100 MB by default).',
    }),
  })
  .strict();

const CreateSceneBody = z
  .object({
    source: SceneSource,
    continuation: z
      .enum(SCENE_CONTINUATIONS)
      .optional()
      .openapi({ description: 'How a call continues the clip at its end; default loop.' }),
    profile: z.enum(SCENE_PROFILES).openapi({ description: 'The build profile; scene-v0 is the one there is.' }),
  })
  .strict()
  .openapi('CreateSceneRequest');

export const route = createRoute({
  operationId: 'createScene',
  method: 'post',
  path: `${V1}/scenes`,
  tags: ['Realtime'],
  summary: 'Prepare a scene (preview)',
  description:
    'Prepares a clip as a call picture: its frames with the face tracked on each, for the lip-sync. The id derives from the content. ' +
    '202 while building (poll GET /scenes/{sceneId}); 200 when already ready, or failed (error says why). Without md5 and bytes the clip is downloaded before the answer; ' +
    'a failed download then answers scene_id "unresolved". 403 scene_sessions_not_enabled when the workspace has no scenes; 422 scene_source_rejected for a URL the address policy refuses; ' +
    '503 scene_builder_unavailable when the builder cannot run here (nothing written).',
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'application/json': { schema: CreateSceneBody } } } },
  responses: {
    200: { description: 'The scene, ready or failed', content: { 'application/json': { schema: SceneSchema } } },
    202: { description: 'The scene, building', content: { 'application/json': { schema: SceneSchema } } },
    ...errorResponses(400, 401, 403, 413, 415, 422, 503),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const { scenes, safeFetch } = c.get('services');
    const answer = await scenes.prepare(c.get('principal').tenantId, c.req.valid('json'), safeFetch);
    return c.json(toWire(answer.scene), answer.status);
  });
}
