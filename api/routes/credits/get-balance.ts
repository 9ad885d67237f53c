import { createRoute, z } from '@hono/zod-openapi';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses, Timestamp } from '../../schemas/common.ts';

export const BalanceSchema = z
  .object({
    tenantId: z.string(),
    balanceCreditMicros: z.number().int(),
    reservedCreditMicros: z.number().int(),
    availableCreditMicros: z.number().int(),
    lifetimeGrantedCreditMicros: z.number().int(),
    lifetimeUsedCreditMicros: z.number().int(),
    updatedAt: Timestamp,
  })
  .openapi('CreditBalance');

export const route = createRoute({
  operationId: 'getCreditBalance',
  method: 'get',
  path: `${V1}/credits/balance`,
  tags: ['Billing'],
  summary: 'Read the credit wallet of the workspace',
  security: [{ bearerAuth: [] }],
  responses: {
    200: { description: 'The balance', content: { 'application/json': { schema: BalanceSchema } } },
    ...errorResponses(401, 403),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const { ledger } = c.get('services');
    return c.json(await ledger.balance(c.get('principal').tenantId), 200);
  });
}
