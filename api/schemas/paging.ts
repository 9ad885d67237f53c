import { z } from '@hono/zod-openapi';
import { ApiError } from '../../core/platform/errors.ts';
import { decodeCursor, type PagePosition } from '../../core/platform/paging.ts';

/** The query fields of a keyset-paged list: `limit` (1 to max) and `cursor` (a nextCursor this API returned). */
export function pageQueryFields(o: { max: number; defaultLimit: number }) {
  return {
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(o.max)
      .optional()
      .openapi({ description: `Page size, 1 to ${o.max}, default ${o.defaultLimit}.` }),
    cursor: z.string().min(1).max(512).optional().openapi({ description: 'nextCursor of the previous page.' }),
  };
}

/** The position a `cursor` query parameter names; 422 naming `cursor` for anything this API did not issue. */
export function pageAfter(cursor: string | undefined): PagePosition | undefined {
  if (cursor === undefined) return undefined;
  const after = decodeCursor(cursor);
  if (!after)
    throw new ApiError('validation_error', 'Invalid field "cursor" in query: not a cursor this API returned', {
      field: 'cursor',
    });
  return after;
}
