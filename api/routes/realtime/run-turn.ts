import type { HttpBindings } from '@hono/node-server';
import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { withIdempotency } from '../../idempotency.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { fromTurnWire, TurnHeaders, TurnRequest } from './turn-schemas.ts';

export const route = createRoute({
  operationId: 'runTurn',
  method: 'post',
  path: `${V1}/realtime/turn`,
  tags: ['Realtime'],
  summary: 'Run a turn (streamed audio and video)',
  description:
    "Speaks `text` (`repeat`) or the LLM's answer to it with the avatar's persona (`talk`), lip-synced on the avatar's idle loop at its cursor, as a streamed " +
    'audio-clocked mux (docs/mux-format.md; decode with readAvatarMux). Everything that can refuse the turn answers before the stream starts: 402 (credits, reserved up front), ' +
    '404, 409 (avatar not ready, or a reused Idempotency-Key), 422, 502 upstream_unreachable or 504 upstream_timeout (the LLM failed before its first word; nothing billed), ' +
    '503 llm_not_configured (talk without an LLM). A failure mid-stream ends it with the ERROR record. Billed for the seconds of audio delivered.',
  security: [{ bearerAuth: [] }],
  request: {
    headers: TurnHeaders,
    body: { required: true, content: { 'application/json': { schema: TurnRequest } } },
  },
  responses: {
    200: {
      description: 'The turn stream (AVMX mux)',
      headers: z.object({
        'X-Turn-Id': z
          .string()
          .openapi({ description: "The turn's id: its usage row (GET /usage/sessions) and the header's turn_id." }),
      }),
      content: { 'application/octet-stream': { schema: z.string().openapi({ format: 'binary' }) } },
    },
    ...errorResponses(400, 401, 402, 403, 404, 409, 413, 415, 422, 502, 503, 504),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const startedAt = performance.now();
    const input = fromTurnWire(c.req.valid('json'));
    // Under the Node server: how a client that stopped reading is let go (in-process requests have none).
    const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
    const { turns } = c.get('services');
    const checked = await turns.check(c.get('principal'), input);
    // No replay: a turn's stream cannot be sent twice, so any reuse of its key is 409.
    const turn = await withIdempotency(c, { scope: 'POST /realtime/turn', request: input }, (settle) =>
      turns.start(checked, {
        started: (turnId) => settle({ status: 200, body: { turn_id: turnId } }),
        signal: c.req.raw.signal,
        startedAt,
        ...(outgoing ? { dropConnection: () => outgoing.destroy() } : {}),
      }),
    );
    return c.body(turn.body, 200, { 'Content-Type': 'application/octet-stream', 'X-Turn-Id': turn.turnId });
  });
}
