import { createRoute } from '@hono/zod-openapi';
import { notFound } from '../../../core/platform/errors.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { AssetIdParam, AssetSchema, checkAssetId, toWire } from './common.ts';

export const route = createRoute({
  operationId: 'getAsset',
  method: 'get',
  path: `${V1}/assets/{assetId}`,
  tags: ['Assets'],
  summary: 'Get an asset',
  description:
    'The asset with a fresh signed publicUrl (valid one hour) when ready: read it again to renew the URL. ' +
    "A failed remote import is readable by the assetId its error answered with. A deleted asset, or another workspace's, is 404.",
  security: [{ bearerAuth: [] }],
  request: { params: AssetIdParam },
  responses: {
    200: { description: 'The asset', content: { 'application/json': { schema: AssetSchema } } },
    ...errorResponses(401, 403, 404, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const assetId = checkAssetId(c.req.valid('param').assetId);
    const { assets } = c.get('services');
    const asset = await assets.get(c.get('principal').tenantId, assetId);
    if (!asset) throw notFound(`Asset ${assetId}`);
    return c.json(await toWire(assets, asset), 200);
  });
}
