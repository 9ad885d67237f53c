/**
 * Semantic validation of a clip-library declaration: parse with the strict schema, refuse
 * `__proto__` keys, and normalise (default duration applied, sources tagged by kind, behavior
 * gathered in the shape the behavior engine reads). No DB, no I/O.
 */
import type { z } from 'zod';
import type { Behavior } from '../behavior/types.ts';
import { DEFAULT_DURATION_SECONDS } from './limits.ts';
import { DeclarationBodySchema, type DeclarationBody, type SourceBody } from './schema.ts';

/** A source after normalisation; `kind` is the `avatar_clips.source_kind` it will be stored as. */
export type NormalisedSource =
  { kind: 'upload'; assetId: string } | { kind: 'generated'; motionPrompt: string; durationSeconds: number };

export interface NormalisedDeclaration {
  expectedRevision: number;
  /** Clip id to its normalised source, in declaration order. */
  clips: Record<string, { source: NormalisedSource }>;
  /** The behaviour the engine (clips/behavior) runs, idle weights kept as declared. */
  behavior: Behavior;
}

/** One reason a declaration is refused; `field` is a path like `clips.wave.source.motionPrompt` or `idle.clips[2]`. */
export interface DeclarationProblem {
  field: string;
  message: string;
}

export type DeclarationResult =
  { ok: true; declaration: NormalisedDeclaration } | { ok: false; problems: DeclarationProblem[] };

/** "a.b[0].c" from a path (same format as api/errors.ts `fieldPath`). */
function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out;
}

/** Paths of every own `__proto__` key in the raw body (zod drops them silently; the id rules refuse them). */
function protoKeys(value: unknown): (string | number)[][] {
  const found: (string | number)[][] = [];
  const stack: { v: unknown; path: (string | number)[] }[] = [{ v: value, path: [] }];
  while (stack.length > 0) {
    const { v, path } = stack.pop()!;
    if (!v || typeof v !== 'object') continue;
    if (Array.isArray(v)) v.forEach((x, i) => stack.push({ v: x, path: [...path, i] }));
    else {
      if (Object.hasOwn(v, '__proto__')) found.push([...path, '__proto__']);
      for (const [k, x] of Object.entries(v)) stack.push({ v: x, path: [...path, k] });
    }
  }
  return found.sort((a, b) => fieldPath(a).localeCompare(fieldPath(b)));
}

/** What sits at `path` in the body as received (zod's issues do not carry it). */
function valueAt(body: unknown, path: readonly PropertyKey[]): { present: boolean; value?: unknown } {
  let v: unknown = body;
  for (const key of path) {
    if (!v || typeof v !== 'object' || !Object.hasOwn(v, key as string)) return { present: false };
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return { present: true, value: v };
}

/** "a string", "an array", "null" ... for a JSON value. */
function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  const t = typeof v;
  return t === 'object' ? 'an object' : `a ${t}`;
}

/** Problems from zod issues, in issue order (one per unknown key). `body` is the body the issues are about. */
function problemsFromZod(error: z.ZodError, body: unknown): DeclarationProblem[] {
  const out: DeclarationProblem[] = [];
  for (const issue of error.issues) {
    const field = fieldPath(issue.path);
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const f = field ? `${field}.${key}` : key;
        out.push({ field: f, message: 'is not a known field (field names are case-sensitive)' });
      }
    } else if (issue.code === 'invalid_type') {
      const at = valueAt(body, issue.path);
      const expected = issue.expected === 'record' ? 'object' : issue.expected;
      out.push({
        field,
        message: at.present
          ? `must be ${/^[aeiou]/.test(expected) ? 'an' : 'a'} ${expected}, got ${kindOf(at.value)}`
          : 'is required',
      });
    } else {
      out.push({ field, message: issue.message });
    }
  }
  return out;
}

function normaliseSource(source: SourceBody): NormalisedSource {
  if ('assetId' in source) return { kind: 'upload', assetId: source.assetId };
  return {
    kind: 'generated',
    motionPrompt: source.motionPrompt,
    durationSeconds: source.durationSeconds ?? DEFAULT_DURATION_SECONDS,
  };
}

function normalise(body: DeclarationBody): NormalisedDeclaration {
  const clips: Record<string, { source: NormalisedSource }> = {};
  for (const [id, clip] of Object.entries(body.clips)) clips[id] = { source: normaliseSource(clip.source) };
  const behavior: Behavior = {};
  if (body.idle) {
    behavior.idle = { clips: [...body.idle.clips] };
    if (body.idle.weight !== undefined) behavior.idle.weight = body.idle.weight;
    if (body.idle.weights !== undefined) behavior.idle.weights = { ...body.idle.weights };
  }
  if (body.on) {
    behavior.on = {};
    if (body.on.userSpeechStarted) behavior.on.userSpeechStarted = { clips: [...body.on.userSpeechStarted.clips] };
  }
  if (body.actions) {
    behavior.actions = {};
    for (const [id, a] of Object.entries(body.actions))
      behavior.actions[id] = { description: a.description, clips: [...a.clips] };
  }
  return { expectedRevision: body.expectedRevision, clips, behavior };
}

/** Validates a PUT body (already JSON-parsed): ok with the normalised declaration, or every problem found, first first. */
export function validateDeclaration(body: unknown): DeclarationResult {
  const proto = protoKeys(body);
  if (proto.length > 0)
    return { ok: false, problems: proto.map((p) => ({ field: fieldPath(p), message: 'is a reserved id' })) };
  const parsed = DeclarationBodySchema.safeParse(body);
  if (!parsed.success) return { ok: false, problems: problemsFromZod(parsed.error, body) };
  return { ok: true, declaration: normalise(parsed.data) };
}
