import { z } from '@hono/zod-openapi';
import { MAX_ALLOWED_ORIGINS, originProblem, type Tenant } from '../../../core/tenants.ts';
import { Timestamp } from '../../schemas/common.ts';

export const WorkspaceSchema = z
  .object({
    id: z.string().openapi({ example: 'ten_0123456789ABCDEFGHij' }),
    name: z.string(),
    status: z.enum(['active', 'suspended']),
    allowedOrigins: z.array(z.string()).openapi({
      description:
        'Web origins whose pages may join its live calls. Empty: no limit (a grant carries the LiveKit token). Otherwise a grant carries a single-use join_token instead, redeemed from one of these origins.',
      example: ['https://app.example.com'],
    }),
    createdAt: Timestamp,
  })
  .openapi('Workspace');

/** A workspace on the wire. */
export const toWorkspaceWire = (t: Tenant): z.infer<typeof WorkspaceSchema> => ({
  id: t.id,
  name: t.name,
  status: t.status,
  allowedOrigins: t.allowedOrigins,
  createdAt: t.createdAt.toISOString(),
});

export const UpdateWorkspaceBody = z
  .object({
    allowedOrigins: z
      .array(z.string().max(2048))
      .max(MAX_ALLOWED_ORIGINS)
      .openapi({
        description: `Replaces the list: at most ${MAX_ALLOWED_ORIGINS} origins, each exactly as a browser sends it in Origin (https://app.example.com, http://localhost:5173: http or https, lowercase, no path, query, trailing slash or wildcard), no duplicates. [] removes the limit.`,
        example: ['https://app.example.com', 'http://localhost:5173'],
      }),
  })
  .strict()
  .superRefine((b, ctx) => {
    const seen = new Set<string>();
    b.allowedOrigins.forEach((o, i) => {
      const problem = seen.has(o) ? 'is listed twice' : originProblem(o);
      seen.add(o);
      if (problem) ctx.addIssue({ code: 'custom', path: ['allowedOrigins', i], message: problem });
    });
  })
  .openapi('UpdateWorkspaceRequest');
