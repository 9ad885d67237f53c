import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { pageAfter, pageQueryFields } from '../../schemas/paging.ts';
import { RecordingSchema, toWire } from './schemas.ts';

const Query = z
  .object({
    sessionId: z.string().min(1).max(128).optional().openapi({ description: "Only this session's recordings." }),
    ...pageQueryFields({ max: 100, defaultLimit: 50 }),
  })
  .strict();

const RecordingPage = z
  .object({ data: z.array(RecordingSchema), nextCursor: z.string().nullable() })
  .openapi('RecordingPage');

export const route = createRoute({
  operationId: 'listRecordings',
  method: 'get',
  path: `${V1}/recordings`,
  tags: ['Connection history and recordings'],
  summary: 'List recordings',
  description:
    "The workspace's recordings, newest first, paged with nextCursor. Recordings past retention stay listed (their media is gone).",
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
    const after = pageAfter(q.cursor);
    const page = await c
      .get('services')
      .recordings.list(c.get('principal').tenantId, { sessionId: q.sessionId, after, limit: q.limit ?? 50 });
    return c.json({ data: page.data.map(toWire), nextCursor: page.nextCursor }, 200);
  });
}
