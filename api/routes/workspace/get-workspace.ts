import { createRoute } from '@hono/zod-openapi';
import { notFound } from '../../../core/platform/errors.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses } from '../../schemas/common.ts';
import { toWorkspaceWire, WorkspaceSchema } from './schemas.ts';

export const route = createRoute({
  operationId: 'getWorkspace',
  method: 'get',
  path: `${V1}/workspace`,
  tags: ['Workspace'],
  summary: "Read the key's workspace and its settings",
  description: 'Any valid key of the workspace may read it.',
  security: [{ bearerAuth: [] }],
  responses: {
    200: { description: 'The workspace', content: { 'application/json': { schema: WorkspaceSchema } } },
    ...errorResponses(401, 403),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const tenant = await c.get('services').tenants.get(c.get('principal').tenantId);
    if (!tenant) throw notFound('Workspace');
    return c.json(toWorkspaceWire(tenant), 200);
  });
}
