import { createRoute } from '@hono/zod-openapi';
import { notFound } from '../../../core/platform/errors.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { toWorkspaceWire, UpdateWorkspaceBody, WorkspaceSchema } from './schemas.ts';

export const route = createRoute({
  operationId: 'updateWorkspace',
  method: 'patch',
  path: `${V1}/workspace`,
  tags: ['Workspace'],
  summary: "Change the workspace's settings: its allowed origins",
  description:
    'Workspace administration (scope api_keys:write). allowedOrigins replaces the list; an invalid entry, more than 20 or a duplicate is 422 naming it (allowedOrigins[i]), and nothing is written. ' +
    'The new list applies at once, also to join tokens minted before it: an origin removed can no longer redeem them.',
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'application/json': { schema: UpdateWorkspaceBody } } } },
  responses: {
    200: { description: 'The workspace as changed', content: { 'application/json': { schema: WorkspaceSchema } } },
    ...errorResponses(400, 401, 403, 413, 415, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const { allowedOrigins } = c.req.valid('json');
    const { tenants, log } = c.get('services');
    const { tenantId, apiKeyId } = c.get('principal');
    const tenant = await tenants.setAllowedOrigins(tenantId, allowedOrigins);
    if (!tenant) throw notFound('Workspace');
    log.info({ tenantId, apiKeyId, allowedOrigins: allowedOrigins.length }, 'workspace allowed origins changed');
    return c.json(toWorkspaceWire(tenant), 200);
  });
}
