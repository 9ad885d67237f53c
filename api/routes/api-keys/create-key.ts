import { createRoute, z } from '@hono/zod-openapi';
import { DEFAULT_KEY_SCOPES, SCOPES } from '../../../core/auth/keys.ts';
import { ApiError } from '../../../core/platform/errors.ts';
import { V1, type App } from '../../context.ts';
import { guarded } from '../../middleware/guard.ts';
import { errorResponses, Timestamp, TimestampInput } from '../../schemas/common.ts';

const CreateKeyBody = z
  .object({
    name: z.string().trim().min(1).max(120),
    scopes: z
      .array(z.enum(SCOPES))
      .min(1)
      .max(SCOPES.length)
      .refine((s) => new Set(s).size === s.length, 'scopes must not repeat')
      .optional()
      .openapi({
        uniqueItems: true,
        description:
          'Defaults to realtime:write, credits:read and avatars:read. A key can grant only scopes the calling key holds.',
      }),
    spendLimitCreditMicros: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullable().optional().openapi({
      description:
        "What this key and the keys minted under it may spend together. Required, and at most the calling key's, when the calling key is spend-limited; the new key's spend also counts against the calling key's limit.",
    }),
    expiresAt: TimestampInput.nullable()
      .optional()
      .openapi({ description: "Required, and no later than the calling key's expiry, when the calling key expires." }),
    environment: z.string().max(32).optional().openapi({ deprecated: true, description: 'Accepted and ignored.' }),
  })
  .strict()
  .openapi('CreateApiKeyRequest');

export const ApiKeySchema = z
  .object({
    id: z.string(),
    keyId: z.string(),
    tenantId: z.string(),
    name: z.string(),
    environment: z.string().openapi({ deprecated: true }),
    redactedKey: z.string(),
    scopes: z.array(z.enum(SCOPES)),
    status: z.enum(['active', 'revoked']),
    spendLimitCreditMicros: z.number().int().nullable(),
    createdAt: Timestamp,
    expiresAt: Timestamp.nullable(),
    apiKey: z.string().openapi({ description: 'The full key, svc_<keyId>_<secret>. Shown only in this response.' }),
  })
  .openapi('ApiKeyCreated');

export const route = createRoute({
  operationId: 'createApiKey',
  method: 'post',
  path: `${V1}/api-keys`,
  tags: ['Billing and keys'],
  summary: 'Mint an API key',
  description:
    "A minted key nests inside the calling key: only scopes the caller holds, a spend limit no higher than its own and an expiry no later than its own (403 naming the field otherwise). Its spend counts against the caller's limit too, and revoking the caller revokes it.",
  security: [{ bearerAuth: [] }],
  request: { body: { required: true, content: { 'application/json': { schema: CreateKeyBody } } } },
  responses: {
    201: { description: 'The key, with the full apiKey', content: { 'application/json': { schema: ApiKeySchema } } },
    ...errorResponses(400, 401, 403, 413, 415, 422),
  },
});

export function register(app: App) {
  app.openapi(guarded(route), async (c) => {
    const body = c.req.valid('json');
    const caller = c.get('principal');
    const scopes = body.scopes ?? DEFAULT_KEY_SCOPES;
    const expiresAt = body.expiresAt ? new Date(body.expiresAt) : null;
    if (expiresAt && expiresAt.getTime() <= Date.now()) {
      throw new ApiError('validation_error', 'Invalid field "expiresAt" in body: must be in the future', {
        field: 'expiresAt',
      });
    }
    const { keys, dashboard } = c.get('services');
    const fromDashboard = caller.dashboardSessionId !== undefined;
    const { record, apiKey } = await keys.create({
      tenantId: caller.tenantId,
      name: body.name,
      scopes,
      spendLimitCreditMicros: body.spendLimitCreditMicros ?? null,
      expiresAt,
      // The new key nests inside the caller (scopes, spend limit, expiry: 403 naming the field
      // otherwise), its spend counts against the caller's limit, and it dies with the caller. A key
      // made in the dashboard is a workspace key: it outlives the session that made it, and its full
      // value is kept encrypted so that owners and admins can copy it again (docs/dashboard.md).
      parentId: fromDashboard ? null : caller.apiKeyId,
    });
    if (fromDashboard) await dashboard.keepSecret(record.id, apiKey);
    return c.json(
      {
        id: record.id,
        keyId: record.keyId,
        tenantId: record.tenantId,
        name: record.name,
        environment: 'live',
        redactedKey: record.redactedKey,
        scopes: record.scopes as (typeof SCOPES)[number][],
        status: record.status,
        spendLimitCreditMicros: record.spendLimitCreditMicros,
        createdAt: record.createdAt.toISOString(),
        expiresAt: record.expiresAt?.toISOString() ?? null,
        apiKey,
      },
      201,
    );
  });
}
