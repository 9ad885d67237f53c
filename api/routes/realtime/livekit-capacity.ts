import { createRoute, z } from '@hono/zod-openapi';
import { DEFAULT_POOL } from '../../../core/live/capacity.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { CapacityPoolName, CapacitySchema, toCapacityWire } from './livekit-schemas.ts';

const Query = z.object({ capacity_pool: CapacityPoolName.optional() }).strict();

export const route = createRoute({
  operationId: 'getLiveCapacity',
  method: 'get',
  path: `${V1}/realtime/livekit/capacity`,
  tags: ['Realtime'],
  summary: 'Snapshot of a capacity pool',
  description:
    'Informational: it does not predict a mint (mints fail over across pools). Do not gate a call on it: mint, and treat the 429 as the queue.',
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
    return c.json(toCapacityWire(await c.get('services').capacity.snapshot(pool)), 200);
  });
}
