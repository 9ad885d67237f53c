import { z } from '@hono/zod-openapi';

/**
 * What a request may hold beyond the fixed shapes its schema describes. One walker, two rules:
 *
 * 1. Every string of every validated request (body, query, path, headers; keys and values) is
 *    free of NUL characters: no PostgreSQL text column accepts one. The validation hook of every
 *    route checks this once (`findJsonProblem(data)`), not each schema.
 * 2. JSON that no schema shapes before it is stored must be storable as it is: no NUL character
 *    and no unpaired UTF-16 surrogate (jsonb refuses both), in keys or values, and at most
 *    MAX_JSON_DEPTH levels of nesting (far beyond any real settings, well within PostgreSQL's
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

export type JsonProblem = { path: (string | number)[]; problem: 'nul' | 'lone_surrogate' | 'depth' };

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function stringProblem(s: string, loneSurrogates: boolean): 'nul' | 'lone_surrogate' | undefined {
  if (s.includes('\u0000')) return 'nul';
  if (loneSurrogates && LONE_SURROGATE.test(s)) return 'lone_surrogate';
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
 * The first problem in `value`: a NUL character (always), an unpaired surrogate (with
 * `loneSurrogates`), nesting deeper than `maxDepth` levels (with `maxDepth`). A problem in a key is
 * reported at the object holding the key. Iterative and linear in the size of the input.
 */
export function findJsonProblem(value: unknown, rules: { maxDepth?: number; loneSurrogates?: boolean } = {}): JsonProblem | undefined {
  const loneSurrogates = rules.loneSurrogates ?? false;
  const maxDepth = rules.maxDepth ?? Infinity;
  const stack: Visit[] = [{ v: value, depth: 0 }];
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const { v, depth } = visit;
    if (typeof v === 'string') {
      const problem = stringProblem(v, loneSurrogates);
      if (problem) return { path: pathOf(visit), problem };
    } else if (v && typeof v === 'object') {
      if (depth + 1 > maxDepth) return { path: pathOf(visit), problem: 'depth' };
      if (Array.isArray(v)) v.forEach((x, i) => stack.push({ v: x, depth: depth + 1, parent: visit, key: i }));
      else {
        for (const [k, x] of Object.entries(v)) {
          const problem = stringProblem(k, loneSurrogates);
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
      return 'must not contain unpaired UTF-16 surrogates';
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
    const found = findJsonProblem(value, { maxDepth: MAX_JSON_DEPTH, loneSurrogates: true });
    if (!found) return;
    if (report === 'inside') ctx.addIssue({ code: 'custom', path: found.path, message: describeJsonProblem(found) });
    else ctx.addIssue({ code: 'custom', message: `${describeJsonProblem(found)}${found.path.length ? ` (at ${fieldPath(found.path)})` : ''}` });
  };
}

export const FREE_JSON_DESCRIPTION = `A JSON object of your own structure: at most ${MAX_JSON_DEPTH} levels deep, no NUL characters or unpaired surrogates.`;

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
