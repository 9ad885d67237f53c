import { isUtf8 } from 'node:buffer';
import { z } from '@hono/zod-openapi';

/**
 * What a request may hold beyond the fixed shapes its schema describes. One walker, two rules:
 *
 * 1. Every string of every validated request (body, query, path, headers; keys and values) is
 *    text: no NUL character (no PostgreSQL text column accepts one) and no unpaired UTF-16
 *    surrogate (a text column would store U+FFFD in its place, silently; jsonb refuses it). Invalid
 *    UTF-8 in a JSON body reaches validation as unpaired surrogates (`escapeInvalidUtf8`), so it is
 *    refused the same way, naming the field. Likewise no number is past a double (`1e309`, parsed
 *    as Infinity). The validation hook of every route checks this once (`findJsonProblem(data)`),
 *    not each schema.
 * 2. JSON that no schema shapes before it is stored must be storable as it is: rule 1, in keys or
 *    values, and at most MAX_JSON_DEPTH levels of nesting (far beyond any real settings, well within PostgreSQL's
 *    limits on jsonb depth). That is a free-form object, a field whose inner structure is the
 *    caller's own (`FreeJsonObject`: an avatar's voice, llm, settings and metadata, an asset's
 *    metadata), and a body a route validates itself past its schema (`StorableJsonBody`: the
 *    clip-library declaration, whose behavior is stored as jsonb).
 *
 * No other depth limit is needed: everything else in a request has the fixed shape of its strict
 * schema, which refuses deeper input at the first level it does not expect (the walk itself is
 * iterative and linear, so hostile nesting costs no more than its size, which the body caps bound).
 */

/** Deepest nesting of a free-form object: `{"a":1}` nests 1 level, `{"a":{"b":[]}}` 3. */
export const MAX_JSON_DEPTH = 16;

export type JsonProblem = { path: (string | number)[]; problem: 'nul' | 'lone_surrogate' | 'number_range' | 'depth' };

/** A JSON number past a double (1e309 parses as Infinity): no column or jsonb holds it (JSON.stringify would store null). */
export const NUMBER_OUT_OF_RANGE = 'the number is out of range';

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** `s` with each unpaired surrogate replaced by U+FFFD (String.prototype.toWellFormed, which ES2022 typings lack). */
export function wellFormed(s: string): string {
  return s.replace(new RegExp(LONE_SURROGATE.source, 'g'), '\uFFFD');
}

function stringProblem(s: string): 'nul' | 'lone_surrogate' | undefined {
  if (s.includes('\u0000')) return 'nul';
  if (LONE_SURROGATE.test(s)) return 'lone_surrogate';
  return undefined;
}

/** A node of the walk: its path is kept as a link to its parent, so that the walk stays linear in the input's size. */
interface Visit {
  v: unknown;
  depth: number;
  parent?: Visit;
  key?: string | number;
}

function pathOf(visit: Visit): (string | number)[] {
  const path: (string | number)[] = [];
  for (let at: Visit | undefined = visit; at?.parent; at = at.parent) path.push(at.key!);
  return path.reverse();
}

/**
 * The first problem in `value`: a NUL character or an unpaired surrogate in a string, a number
 * past a double (always), nesting deeper than `maxDepth` levels (with `maxDepth`). A problem in a key is reported at the
 * object holding the key. Iterative and linear in the size of the input.
 */
export function findJsonProblem(value: unknown, rules: { maxDepth?: number } = {}): JsonProblem | undefined {
  const maxDepth = rules.maxDepth ?? Infinity;
  const stack: Visit[] = [{ v: value, depth: 0 }];
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const { v, depth } = visit;
    if (typeof v === 'string') {
      const problem = stringProblem(v);
      if (problem) return { path: pathOf(visit), problem };
    } else if (typeof v === 'number') {
      if (!Number.isFinite(v)) return { path: pathOf(visit), problem: 'number_range' };
    } else if (v && typeof v === 'object') {
      if (depth + 1 > maxDepth) return { path: pathOf(visit), problem: 'depth' };
      if (Array.isArray(v)) v.forEach((x, i) => stack.push({ v: x, depth: depth + 1, parent: visit, key: i }));
      else {
        for (const [k, x] of Object.entries(v)) {
          const problem = stringProblem(k);
          if (problem) return { path: pathOf(visit), problem };
          stack.push({ v: x, depth: depth + 1, parent: visit, key: k });
        }
      }
    }
  }
  return undefined;
}

/** The problem in words, after "Invalid field ...: ". */
export function describeJsonProblem(p: JsonProblem): string {
  switch (p.problem) {
    case 'nul':
      return 'must not contain NUL characters';
    case 'lone_surrogate':
      return 'must not contain unpaired UTF-16 surrogates or invalid UTF-8';
    case 'number_range':
      return NUMBER_OUT_OF_RANGE;
    case 'depth':
      return `must not nest deeper than ${MAX_JSON_DEPTH} levels`;
  }
}

/** "a.b[0].c" from a path (zod issue paths included). */
export function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out;
}

/**
 * Rule 2 as a zod refinement. `field`: the issue names the free-form field itself and the message
 * says where inside it the problem is (free-form fields, and those with rules of their own such as
 * key caps). `inside`: the issue names the exact place (a raw body, whose places are fields).
 */
export function refineStorableJson(report: 'field' | 'inside') {
  return (value: Record<string, unknown>, ctx: z.RefinementCtx): void => {
    const found = findJsonProblem(value, { maxDepth: MAX_JSON_DEPTH });
    if (!found) return;
    if (report === 'inside') ctx.addIssue({ code: 'custom', path: found.path, message: describeJsonProblem(found) });
    else
      ctx.addIssue({
        code: 'custom',
        message: `${describeJsonProblem(found)}${found.path.length ? ` (at ${fieldPath(found.path)})` : ''}`,
      });
  };
}

export const FREE_JSON_DESCRIPTION = `A JSON object of your own structure: at most ${MAX_JSON_DEPTH} levels deep, no NUL characters or unpaired surrogates.`;

/** Bytes of a valid UTF-8 sequence starting at `i` (2 to 4; WHATWG's rules: no overlongs, surrogates or values past U+10FFFF), or 0. */
function utf8SequenceAt(b: Uint8Array, i: number): number {
  const c = b[i]!;
  const cont = (k: number, lo = 0x80, hi = 0xbf) => {
    const x = b[i + k];
    return x !== undefined && x >= lo && x <= hi;
  };
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) return cont(1, c === 0xe0 ? 0xa0 : 0x80, c === 0xed ? 0x9f : 0xbf) && cont(2) ? 3 : 0;
  if (c >= 0xf0 && c <= 0xf4)
    return cont(1, c === 0xf0 ? 0x90 : 0x80, c === 0xf4 ? 0x8f : 0xbf) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/**
 * A JSON body's bytes with each byte of invalid UTF-8 inside a string written as the escape of a
 * lone low surrogate (`\udc80` to `\udcff`, as Python's surrogateescape does): JSON.parse then
 * gives validation a string that rule 1 refuses, naming its field, where decoding would have put
 * U+FFFD in its place, silently. An invalid byte anywhere else (outside a string, or right after a
 * backslash) becomes U+FFFD, which JSON allows in neither place: the body stays malformed.
 * Undefined when the bytes are valid UTF-8 (the common case, checked natively first).
 */
export function escapeInvalidUtf8(bytes: Uint8Array): Buffer | undefined {
  if (isUtf8(bytes)) return undefined;
  const parts: Buffer[] = [];
  let inString = false;
  let escaped = false;
  let start = 0;
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i]!;
    if (b < 0x80) {
      if (!inString) inString = b === 0x22;
      else if (escaped) escaped = false;
      else if (b === 0x5c) escaped = true;
      else if (b === 0x22) inString = false;
      i++;
      continue;
    }
    const n = utf8SequenceAt(bytes, i);
    if (n === 0) {
      parts.push(
        Buffer.from(bytes.subarray(start, i)),
        Buffer.from(inString && !escaped ? `\\udc${b.toString(16)}` : '\ufffd', 'utf8'),
      );
      start = i + 1;
    }
    escaped = false;
    i += n || 1;
  }
  parts.push(Buffer.from(bytes.subarray(start)));
  return Buffer.concat(parts);
}

/** A free-form JSON object of the caller's own structure (rule 2 above). */
export const FreeJsonObject = z
  .record(z.string(), z.unknown())
  .superRefine(refineStorableJson('field'))
  .openapi({ description: FREE_JSON_DESCRIPTION });

/**
 * A JSON object body that a route hands on unparsed, for code past the schema to validate (PUT
 * /avatars/{avatarId}/clips): held to rule 2 as a whole, since it is stored as sent.
 */
export const StorableJsonBody = z.record(z.string(), z.unknown()).superRefine(refineStorableJson('inside'));
