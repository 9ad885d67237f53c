import { createRoute } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { checkRecordingId, RecordingIdParam, RecordingSchema, toWire } from './schemas.ts';

export const route = createRoute({
  operationId: 'getRecording',
  method: 'get',
  path: `${V1}/recordings/{recordingId}`,
  tags: ['Connection history and recordings'],
  summary: 'Get a recording',
  description:
    'Current status and retention deadline. The media can finish processing after the call ends: poll until ready.',
  security: [{ bearerAuth: [] }],
  request: { params: RecordingIdParam },
  responses: {
    200: { description: 'The recording', content: { 'application/json': { schema: RecordingSchema } } },
    ...errorResponses(401, 403, 404, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const id = checkRecordingId(c.req.valid('param').recordingId);
    return c.json(toWire(await c.get('services').recordings.get(c.get('principal').tenantId, id)), 200);
  });
}
