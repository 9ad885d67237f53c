import { z } from '@hono/zod-openapi';

export const ErrorSchema = z
  .object({
    error: z.string().openapi({ description: 'Actionable message. Switch on code and status, not on this wording.' }),
    status: z.number().int(),
    code: z.string().optional(),
    retryable: z.boolean(),
    billingUrl: z.string().optional(),
    requestId: z.string().optional(),
    field: z.string().nullable().optional().openapi({ description: 'The offending field, on validation errors.' }),
  })
  .openapi('Error');

const DESCRIPTIONS: Record<number, string> = {
  400: 'Malformed request',
  401: 'Missing, malformed, revoked or expired API key',
  402: 'Insufficient credits or spend limit exceeded',
  403: 'Key lacks the scope, or the workspace is not active',
  404: 'No such resource for this tenant',
  409: 'Conflict with existing state',
  413: 'Body over the route cap',
  415: 'Unsupported content type',
  422: 'Validation failed: the message names the field',
  429: 'Rate limited, concurrency limit or capacity queue',
  500: 'Internal error',
  502: 'Upstream failure',
  503: 'Dependency unavailable',
};

/** The error responses of a route, for the OpenAPI document. 429 and 500 apply everywhere. */
export function errorResponses(...statuses: number[]) {
  const all = [...new Set([...statuses, 429, 500])].sort();
  return Object.fromEntries(
    all.map((s) => [s, { description: DESCRIPTIONS[s] ?? 'Error', content: { 'application/json': { schema: ErrorSchema } } }]),
  ) as Record<number, { description: string; content: { 'application/json': { schema: typeof ErrorSchema } } }>;
}

/** Years PostgreSQL timestamps and JavaScript ISO strings agree on. */
export function inTimestampRange(d: Date): boolean {
  const y = d.getUTCFullYear();
  return !Number.isNaN(d.getTime()) && y >= 1 && y <= 9999;
}

/** An ISO 8601 timestamp in a request (with a zone or offset), years 0001 to 9999 in UTC. */
export const TimestampInput = z.iso
  .datetime({ offset: true })
  .refine((v) => inTimestampRange(new Date(v)), 'must be between years 0001 and 9999 (UTC)')
  .openapi({ format: 'date-time', example: '2026-01-01T00:00:00Z' });

/** ISO 8601 timestamp on the wire. */
export const Timestamp = z.string().openapi({ format: 'date-time', example: '2026-01-01T00:00:00.000Z' });
