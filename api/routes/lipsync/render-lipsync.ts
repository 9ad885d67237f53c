import { createRoute } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { fromLipsyncWire, LipsyncBody, LipsyncResponse, toLipsyncWire } from './schemas.ts';

export const route = createRoute({
  operationId: 'renderLipsync',
  method: 'post',
  path: `${V1}/lipsync`,
  tags: ['Realtime'],
  summary: 'Render audio to a lip-synced talking-head MP4',
  description:
    "Lip-syncs the audio over the avatar's idle loop (or a portrait registered on the fly) and answers the stored MP4's signed URL once it is " +
    'rendered: no language model, no speech synthesis, no streaming. Billed as realtime seconds like a turn: once the audio is read, its video ' +
    'seconds are reserved (402 before anything renders), and settled to the rendered seconds; a failed render bills nothing. Audio is capped in ' +
    'size and length (422 audio_too_long, 413). 422 for a URL that is not http(s), whose address is refused, that is not audio (or not an image), ' +
    'for a portrait without a usable face (portrait_rejected) or an expired signed media URL (media_url_expired); the error names the field. ' +
    '404 for an unknown avatar, 409 for one that is not ready. 502 when a download or the render fails (safe to retry). See docs/lipsync.md.',
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'application/json': { schema: LipsyncBody } } } },
  responses: {
    200: { description: 'The rendered MP4', content: { 'application/json': { schema: LipsyncResponse } } },
    ...errorResponses(400, 401, 402, 403, 404, 408, 409, 413, 415, 422, 502, 504),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const body = c.req.valid('json');
    const principal = c.get('principal');
    const { lipsync } = c.get('services');
    const result = await lipsync.render({
      tenantId: principal.tenantId,
      apiKeyId: principal.apiKeyId,
      ...fromLipsyncWire(body),
      signal: c.req.raw.signal,
    });
    return c.json(toLipsyncWire(result), 200);
  });
}
