import { createRoute, z } from '@hono/zod-openapi';
import { ApiError } from '../../../core/errors.ts';
import { decodeCursor } from '../../../core/usage.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { RecordingSchema, toWire } from './schemas.ts';

const Query = z
  .object({
    sessionId: z.string().min(1).max(128).optional().openapi({ description: "Only this session's recordings." }),
    limit: z.coerce.number().int().min(1).max(100).optional().openapi({ description: 'Page size, 1 to 100, default 50.' }),
    cursor: z.string().min(1).max(512).optional().openapi({ description: 'nextCursor of the previous page.' }),
  })
  .strict();

const RecordingPage = z.object({ data: z.array(RecordingSchema), nextCursor: z.string().nullable() }).openapi('RecordingPage');

export const route = createRoute({
  operationId: 'listRecordings',
  method: 'get',
  path: `${V1}/recordings`,
  tags: ['Connection history and recordings'],
  summary: 'List recordings',
  description: "The workspace's recordings, newest first, paged with nextCursor. Recordings past retention stay listed (their media is gone).",
  security: [{ bearerAuth: [] }],
  request: { query: Query },
  responses: {
    200: { description: 'One page of recordings', content: { 'application/json': { schema: RecordingPage } } },
    ...errorResponses(401, 403, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const q = c.req.valid('query');
    const after = q.cursor ? decodeCursor(q.cursor) : undefined;
    if (q.cursor && !after) throw new ApiError('validation_error', 'Invalid field "cursor" in query: not a cursor this API returned', { field: 'cursor' });
    const page = await c.get('services').recordings.list(c.get('principal').tenantId, { sessionId: q.sessionId, after, limit: q.limit ?? 50 });
    return c.json({ data: page.data.map(toWire), nextCursor: page.nextCursor }, 200);
  });
}
