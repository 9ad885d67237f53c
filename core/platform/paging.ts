/**
 * The opaque cursor of every keyset-paged list (usage rows, recordings, assets): the position of the
 * last row of a page, `(createdAt, id)`, in url-safe base64. The next page is the rows strictly
 * after it in `created_at desc, id desc` order.
 */

export interface PagePosition {
  createdAt: Date;
  id: string;
}

export function encodeCursor(createdAt: Date, id: string): string {
  return Buffer.from(JSON.stringify([createdAt.toISOString(), id])).toString('base64url');
}

export function decodeCursor(cursor: string): PagePosition | undefined {
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== 'string' || typeof v[1] !== 'string') return undefined;
    const createdAt = new Date(v[0]);
    const year = createdAt.getUTCFullYear();
    // Only what the API could have issued: a real row's time and id.
    if (Number.isNaN(createdAt.getTime()) || year < 1 || year > 9999 || v[1].includes('\u0000') || v[1].length > 64)
      return undefined;
    return { createdAt, id: v[1] };
  } catch {
    return undefined;
  }
}
