import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses, Timestamp } from '../../schemas/common.ts';
import { checkRecordingId, RecordingIdParam } from './schemas.ts';

const RecordingAccess = z
  .object({
    url: z.string().openapi({
      format: 'uri',
      description: 'Private playback URL of the MP4: GET, with HTTP Range for seeking. No key needed: keep it private.',
    }),
    expiresAt: Timestamp.openapi({
      description:
        'The URL stops working then: at most one hour from now, never past retention. Ask again for a fresh one.',
    }),
  })
  .openapi('RecordingAccess');

export const route = createRoute({
  operationId: 'getRecordingAccess',
  method: 'get',
  path: `${V1}/recordings/{recordingId}/access`,
  tags: ['Connection history and recordings'],
  summary: "Get a recording's playback URL",
  description:
    'A signed playback URL of a ready recording, seekable (Range), valid at most one hour and renewable within retention. ' +
    '409 recording_not_ready while processing (retryable), 409 recording_failed for a failed one, 404 recording_expired once retention ended.',
  security: [{ bearerAuth: [] }],
  request: { params: RecordingIdParam },
  responses: {
    200: { description: 'The playback URL', content: { 'application/json': { schema: RecordingAccess } } },
    ...errorResponses(401, 403, 404, 409, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const id = checkRecordingId(c.req.valid('param').recordingId);
    const access = await c.get('services').recordings.access(c.get('principal').tenantId, id);
    return c.json({ url: access.url, expiresAt: access.expiresAt.toISOString() }, 200);
  });
}
