import { createRoute, z } from '@hono/zod-openapi';
import { MAX_LIST } from '../../../core/assets/index.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { pageAfter, pageQueryFields } from '../../schemas/paging.ts';
import { AssetKindSchema, AssetSchema, AssetStatusSchema, toWire } from './common.ts';

const Query = z
  .object({
    ...pageQueryFields({ max: MAX_LIST, defaultLimit: MAX_LIST }),
    status: AssetStatusSchema.optional().openapi({
      description: 'Only assets in this status (for example ready, to leave failed imports out).',
    }),
    kind: AssetKindSchema.optional().openapi({ description: 'Only assets of this kind.' }),
  })
  .strict();

const AssetPage = z.object({ data: z.array(AssetSchema), nextCursor: z.string().nullable() }).openapi('AssetList');

export const route = createRoute({
  operationId: 'listAssets',
  method: 'get',
  path: `${V1}/assets`,
  tags: ['Assets'],
  summary: "List the workspace's assets",
  description:
    `Most recently created first, ${MAX_LIST} per page by default, paged with nextCursor (null on the last page). ` +
    'Failed remote imports are listed with their status and error; status=ready leaves them out. Deleted assets are not listed. ' +
    'Each ready asset carries a fresh signed publicUrl.',
  security: [{ bearerAuth: [] }],
  request: { query: Query },
  responses: {
    200: { description: 'One page of assets', content: { 'application/json': { schema: AssetPage } } },
    ...errorResponses(401, 403, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const q = c.req.valid('query');
    const after = pageAfter(q.cursor);
    const { assets } = c.get('services');
    const page = await assets.list(c.get('principal').tenantId, {
      after,
      limit: q.limit ?? MAX_LIST,
      status: q.status,
      kind: q.kind,
    });
    return c.json(
      { data: await Promise.all(page.data.map((a) => toWire(assets, a))), nextCursor: page.nextCursor },
      200,
    );
  });
}
