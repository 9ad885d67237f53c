import { z } from '@hono/zod-openapi';
import { IDEMPOTENCY_KEY_MAX } from '../../core/idempotency.ts';

export const ErrorSchema = z
  .object({
    error: z.string().openapi({ description: 'Actionable message. Switch on code and status, not on this wording.' }),
    status: z.number().int().openapi({ description: 'The HTTP status, repeated.' }),
    code: z
      .string()
      .optional()
      .openapi({ description: 'Stable machine code; absent only on the per-key rate-limit 429.' }),
    retryable: z
      .boolean()
      .openapi({ description: 'Whether retrying the same request without any change is expected to help.' }),
    billingUrl: z.string().optional().openapi({ description: 'On 402: where to top up (relative URL).' }),
    requestId: z.string().optional().openapi({ description: 'The X-Request-ID of the answer.' }),
    field: z
      .string()
      .nullable()
      .optional()
      .openapi({ description: 'The offending field, on validation errors (null when the problem is the whole body).' }),
    issues: z.number().int().optional().openapi({
      description: 'How many problems validation found, when more than one (the message names the first).',
    }),
    requiredScope: z
      .string()
      .optional()
      .openapi({ description: 'On 403 for a missing scope: the scope the operation needs.' }),
    maxBytes: z.number().int().optional().openapi({ description: 'On 413: the cap that was exceeded.' }),
    currentRevision: z
      .number()
      .int()
      .optional()
      .openapi({ description: 'On 409 revision_conflict: the clip library revision to declare against.' }),
    currentAnchorVersion: z
      .number()
      .int()
      .optional()
      .openapi({ description: 'On 409 for a stale anchor: the current clip anchor version.' }),
    assetId: z.string().optional().openapi({ description: 'On a refused remote import: the failed asset row.' }),
    usedBy: z
      .object({
        avatarIds: z.array(z.string()).openapi({ description: 'Live avatars whose portrait the asset is.' }),
        clips: z
          .array(z.object({ avatarId: z.string(), clipId: z.string() }))
          .openapi({ description: 'Live clips whose uploaded source the asset is.' }),
      })
      .optional()
      .openapi({ description: 'On 409 asset_in_use: what uses the asset (at most 100 of each).' }),
  })
  .openapi('Error', {
    description:
      'The error body of every 4xx and 5xx answer. Some codes add fields of their own, listed here where stable.',
  });

/** The Idempotency-Key header of the operations that honour it (replayed for 24 h; another body under the same key is 409). */
export const IdempotencyKeyHeader = z.object({
  'idempotency-key': z
    .string()
    .min(1)
    .max(IDEMPOTENCY_KEY_MAX)
    .optional()
    .openapi({
      description: `1 to ${IDEMPOTENCY_KEY_MAX} characters. A repeat with the same body replays the stored answer; another body under the same key is 409 idempotency_conflict.`,
    }),
});

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
    all.map((s) => [
      s,
      { description: DESCRIPTIONS[s] ?? 'Error', content: { 'application/json': { schema: ErrorSchema } } },
    ]),
  ) as Record<number, { description: string; content: { 'application/json': { schema: typeof ErrorSchema } } }>;
}

/** Years PostgreSQL timestamps and JavaScript ISO strings agree on. */
function inTimestampRange(d: Date): boolean {
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
