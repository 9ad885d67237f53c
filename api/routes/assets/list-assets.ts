import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { AssetSchema, toWire } from './common.ts';

export const route = createRoute({
  operationId: 'listAssets',
  method: 'get',
  path: `${V1}/assets`,
  tags: ['Assets'],
  summary: "List the workspace's assets",
  description: 'Most recently created first, at most 100. Each ready asset carries a fresh signed publicUrl.',
  security: [{ bearerAuth: [] }],
  request: { query: z.object({}).strict() },
  responses: {
    200: { description: 'The assets', content: { 'application/json': { schema: z.object({ data: z.array(AssetSchema) }).openapi('AssetList') } } },
    ...errorResponses(401, 403, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const { assets } = c.get('services');
    const rows = await assets.list(c.get('principal').tenantId);
    return c.json({ data: await Promise.all(rows.map((a) => toWire(assets, a))) }, 200);
  });
}
