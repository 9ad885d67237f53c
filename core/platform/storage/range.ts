import type { ByteRange } from './types.ts';

export type RangeRequest = { kind: 'full' } | { kind: 'partial'; range: ByteRange } | { kind: 'unsatisfiable' };

/**
 * One HTTP `Range: bytes=...` header against an object of `size` bytes. No header, another unit or
 * several ranges: the full object (RFC 9110 lets a server ignore Range). A malformed or
 * unsatisfiable single range: 416.
 */
export function parseRange(header: string | undefined | null, size: number): RangeRequest {
  if (!header) return { kind: 'full' };
  const m = /^\s*bytes\s*=\s*(.*)$/i.exec(header);
  if (!m) return { kind: 'full' };
  const spec = m[1]!.trim();
  if (spec.includes(',')) return { kind: 'full' };
  const parts = /^(\d*)\s*-\s*(\d*)$/.exec(spec);
  if (!parts || (parts[1] === '' && parts[2] === '') || size === 0) return { kind: 'unsatisfiable' };
  const [, a, b] = parts as unknown as [string, string, string];
  if (a === '') {
    const n = Number(b);
    if (n === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', range: { start: Math.max(0, size - n), end: size - 1 } };
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Number(b);
  if (start > end || start >= size) return { kind: 'unsatisfiable' };
  return { kind: 'partial', range: { start, end: Math.min(end, size - 1) } };
}
