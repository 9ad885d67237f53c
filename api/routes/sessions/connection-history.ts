import { createRoute, z } from '@hono/zod-openapi';
import { notFound } from '../../../core/platform/errors.ts';
import { connectionHistory } from '../../../core/live/sessions.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses, Timestamp } from '../../schemas/common.ts';

const Params = z.object({
  sessionId: z.string().openapi({
    param: { name: 'sessionId', in: 'path' },
    example: 'ses_0123456789ABCDEFGHij',
    description: 'A live call: ses_...',
  }),
});

const SESSION_ID = /^ses_[0-9A-Za-z]{1,64}$/;

const ConnectionEventSchema = z
  .object({
    participantIdentity: z.string(),
    role: z
      .enum(['user', 'avatar', 'agent', 'other'])
      .openapi({ description: "The participant's part in the call, by identity." }),
    kind: z.enum(['joined', 'left', 'reconnected', 'track_published', 'track_unpublished']),
    trackKind: z.enum(['audio', 'video']).nullable().openapi({ description: 'On track events.' }),
    trackSource: z
      .string()
      .nullable()
      .openapi({ description: 'On track events: microphone, camera, screen_share, screen_share_audio, unknown.' }),
    occurredAt: Timestamp,
    source: z
      .enum(['webhook', 'worker'])
      .openapi({ description: 'Who observed it: a LiveKit webhook, or the avatar worker in the room.' }),
  })
  .openapi('ConnectionEvent');

export const route = createRoute({
  operationId: 'getConnectionHistory',
  method: 'get',
  path: `${V1}/sessions/{sessionId}/connection-history`,
  tags: ['Connection history'],
  summary: "A live call's connection observations",
  description:
    "Participants joining and leaving and their tracks, oldest first (at most 1,000), as LiveKit's webhooks and the avatar worker observed them. " +
    "Empty data means nothing was observed (or the workspace does not collect connection history). Another workspace's session is 404.",
  security: [{ bearerAuth: [] }],
  request: { params: Params },
  responses: {
    200: {
      description: 'The observations',
      content: {
        'application/json': { schema: z.object({ data: z.array(ConnectionEventSchema) }).openapi('ConnectionHistory') },
      },
    },
    ...errorResponses(401, 403, 404, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const { sessionId } = c.req.valid('param');
    if (!SESSION_ID.test(sessionId)) throw notFound(`Session ${sessionId.slice(0, 80)}`);
    const { sql, liveCalls } = c.get('services');
    const { tenantId } = c.get('principal');
    await liveCalls.get(tenantId, sessionId);
    return c.json({ data: await connectionHistory(sql, tenantId, sessionId) }, 200);
  });
}
