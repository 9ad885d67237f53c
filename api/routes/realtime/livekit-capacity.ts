import { createRoute, z } from '@hono/zod-openapi';
import { DEFAULT_POOL } from '../../../core/live/capacity.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { CapacityPoolName } from './livekit-schemas.ts';

const Query = z.object({ capacity_pool: CapacityPoolName.optional() }).strict();

const CapacitySchema = z
  .object({
    capacity_pool: z.string(),
    slots: z.number().int().openapi({ description: "The pool's calls at once: the operator's count, else what its live agent workers declare." }),
    in_use: z.number().int(),
    available: z.number().int().openapi({ description: 'max(0, slots - in_use).' }),
    queue_size: z.number().int().openapi({ description: 'Mints queued for the pool.' }),
    workers: z.number().int().openapi({ description: 'Live agent workers serving the pool.' }),
  })
  .openapi('LiveCapacity');

export const route = createRoute({
  operationId: 'getLiveCapacity',
  method: 'get',
  path: `${V1}/realtime/livekit/capacity`,
  tags: ['Realtime'],
  summary: 'Snapshot of a capacity pool',
  description: 'Informational: it does not predict a mint (mints fail over across pools). Do not gate a call on it: mint, and treat the 429 as the queue.',
  security: [{ bearerAuth: [] }],
  request: { query: Query },
  responses: {
    200: { description: 'The pool now', content: { 'application/json': { schema: CapacitySchema } } },
    ...errorResponses(401, 403, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const pool = c.req.valid('query').capacity_pool ?? DEFAULT_POOL;
    const s = await c.get('services').capacity.snapshot(pool);
    return c.json({ capacity_pool: pool, slots: s.slots, in_use: s.inUse, available: Math.max(0, s.slots - s.inUse), queue_size: s.queueSize, workers: s.workers }, 200);
  });
}
