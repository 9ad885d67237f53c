import { createRoute, z } from '@hono/zod-openapi';
import { ApiError } from '../../../core/platform/errors.ts';
import { effectiveWindow } from '../../../core/usage.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { pageAfter } from '../../schemas/paging.ts';
import { errorResponses, Timestamp, TimestampInput } from '../../schemas/common.ts';

const Query = z
  .object({
    from: TimestampInput.optional().openapi({ description: 'Window start (ISO 8601). Default: 30 days before `to`.' }),
    to: TimestampInput.optional().openapi({ description: 'Window end (ISO 8601). Default: now.' }),
    endUserId: z.string().min(1).max(256).optional(),
    cursor: z.string().min(1).max(512).optional(),
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(100)
      .optional()
      .openapi({ description: 'Page size, 1 to 100, default 50.' }),
  })
  .strict();

const UsageRow = z
  .object({
    sessionId: z.string(),
    kind: z.enum(['turn', 'live', 'lipsync', 'generation']),
    avatarId: z.string().nullable(),
    endUserId: z.string().nullable(),
    status: z.enum(['reserved', 'started', 'released', 'failed']),
    startedAt: Timestamp.nullable(),
    endedAt: Timestamp.nullable(),
    billableSeconds: z.number(),
    billedCreditMicros: z.number().int(),
    createdAt: Timestamp,
  })
  .openapi('SessionUsage');

const UsagePage = z
  .object({ data: z.array(UsageRow), from: Timestamp, to: Timestamp, nextCursor: z.string().nullable() })
  .openapi('SessionUsagePage');

export const route = createRoute({
  operationId: 'listSessionUsage',
  method: 'get',
  path: `${V1}/usage/sessions`,
  tags: ['Billing and keys'],
  summary: 'Per-session billing detail',
  description:
    'Sessions created in the window, newest first. The window defaults to the trailing 30 days and a wider one is narrowed to 90 days; the effective window is echoed as from/to. Reconcile on released and failed rows only.',
  security: [{ bearerAuth: [] }],
  request: { query: Query },
  responses: {
    200: { description: 'One page of usage rows', content: { 'application/json': { schema: UsagePage } } },
    ...errorResponses(401, 403, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const q = c.req.valid('query');
    const from = q.from ? new Date(q.from) : undefined;
    const to = q.to ? new Date(q.to) : undefined;
    const window = effectiveWindow(from, to);
    if (window.from > window.to) {
      throw new ApiError(
        'validation_error',
        'Invalid field "from" in query: must not be after "to" (which defaults to now)',
        { field: 'from' },
      );
    }
    const after = pageAfter(q.cursor);
    const page = await c.get('services').usage.list(c.get('principal').tenantId, {
      window,
      endUserId: q.endUserId,
      after,
      limit: q.limit ?? 50,
    });
    return c.json({ ...page, from: window.from.toISOString(), to: window.to.toISOString() }, 200);
  });
}
