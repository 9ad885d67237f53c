import { createRoute } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { AssetIdParam, checkAssetId } from './common.ts';

export const route = createRoute({
  operationId: 'deleteAsset',
  method: 'delete',
  path: `${V1}/assets/{assetId}`,
  tags: ['Assets'],
  summary: 'Delete an asset',
  description:
    'Removes the stored bytes (earlier signed URLs stop working) and the asset is gone from every read (404) from then on. ' +
    'Refused with 409 asset_in_use while a live avatar uses it as its portrait or a live clip as its source: usedBy names them ' +
    '(avatarIds, clips). Failed and pending imports can be deleted too.',
  security: [{ bearerAuth: [] }],
  request: { params: AssetIdParam },
  responses: {
    204: { description: 'Deleted' },
    ...errorResponses(401, 403, 404, 409, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const assetId = checkAssetId(c.req.valid('param').assetId);
    await c.get('services').assets.remove(c.get('principal').tenantId, assetId);
    return c.body(null, 204);
  });
}
