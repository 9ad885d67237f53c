import net from 'node:net';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { testApi, waitFor, type TestApi } from '../test/helpers.ts';
import { V1 } from './context.ts';
import type { HttpLimits } from './http-limits.ts';
import { ROUTES, type RouteModule } from './routes/index.ts';
import { startApiServer, type ApiServer } from './server.ts';

/**
 * Fuzzes every route of ROUTES (new routes are covered as soon as they are listed there): hostile
 * bodies, bytes, content types, path params, path suffixes, query strings and Authorization headers,
 * with and without a valid key; over real HTTP, raw bytes Node's parser or the request adapter
 * refuses (unparseable URLs and Host headers), and clients that stall, trickle or hang up. Whatever is
 * sent, the answer is never a 5xx, every error is the JSON error body (docs/api.md, "Errors") with
 * the X-Request-ID and Cache-Control: no-store headers, and no client holds a connection past the
 * server's bounds.
 *
 * Deterministic: fixed seeds (FUZZ_SEED overrides the base seed, FUZZ_SCALE multiplies the runs,
 * FUZZ_SUMMARY=1 prints the status histogram of each probe kind).
 */

const BASE_SEED = Number(process.env.FUZZ_SEED ?? 20_260_101);
const SCALE = Number(process.env.FUZZ_SCALE ?? 1);
const runs = (n: number) => Math.max(1, Math.round(n * SCALE));

/** A stable seed per test, so that adding a test does not reshuffle the others. */
function seedOf(name: string): number {
  let h = BASE_SEED | 0;
  for (let i = 0; i < name.length; i++) h = (Math.imul(h, 31) + name.charCodeAt(i)) | 0;
  return h;
}

// ---------------------------------------------------------------------------------------------
// Probes and the invariant every answer must hold
// ---------------------------------------------------------------------------------------------

interface Probe {
  /** What kind of probe, for failure messages and the summary. */
  kind: string;
  method: string;
  /** Path and query, sent as-is. */
  url: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
}

const stats = new Map<string, Map<number, number>>();

function tally(kind: string, status: number): void {
  let m = stats.get(kind);
  if (!m) stats.set(kind, (m = new Map()));
  m.set(status, (m.get(status) ?? 0) + 1);
}

function clip(s: string, max = 300): string {
  return s.length > max ? `${s.slice(0, max)}... (${s.length} chars)` : s;
}

function describeProbe(p: Probe): string {
  const body =
    p.body === undefined ? undefined : typeof p.body === 'string' ? clip(p.body) : `<${p.body.length} bytes>`;
  const headers = Object.fromEntries(Object.entries(p.headers).map(([k, v]) => [k, clip(v, 120)]));
  return JSON.stringify({ kind: p.kind, method: p.method, url: clip(p.url), headers, body });
}

interface Answer {
  status: number;
  headers: { get(name: string): string | null };
  text: string;
}

/** The invariant: below 500, headers always present, and an error is the JSON error body. */
function verify(p: Probe, res: Answer): void {
  const where = `${res.status} for ${describeProbe(p)}\nresponse: ${clip(res.text, 500)}`;
  tally(p.kind, res.status);
  expect(res.status, `5xx: ${where}`).toBeLessThan(500);
  expect(res.status, where).toBeGreaterThanOrEqual(200);
  const requestId = res.headers.get('x-request-id');
  expect(requestId ?? '', `no X-Request-ID: ${where}`).toMatch(/^req_[\w-]+$/);
  expect(res.headers.get('cache-control') ?? '', `no Cache-Control: no-store: ${where}`).toBe('no-store');
  if (res.status < 400 || p.method === 'HEAD') return;
  expect(res.headers.get('content-type') ?? '', `error not JSON: ${where}`).toMatch(/^application\/json/);
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(res.text) as Record<string, unknown>;
  } catch {
    throw new Error(`error body is not JSON: ${where}`);
  }
  expect(typeof body, where).toBe('object');
  expect(typeof body.error === 'string' && body.error.length > 0, `no error message: ${where}`).toBe(true);
  expect(body.status, `body status differs: ${where}`).toBe(res.status);
  expect(typeof body.retryable, `no retryable boolean: ${where}`).toBe('boolean');
  expect(body.requestId, `body requestId differs from the header: ${where}`).toBe(requestId);
  if ('code' in body) expect(typeof body.code, where).toBe('string');
}

let api: TestApi;
/** A key with every scope, on a tenant with credits: requests with it reach the validators and handlers. */
let validKey: string;

async function send(p: Probe): Promise<Answer> {
  const init: RequestInit = { method: p.method, headers: p.headers };
  if (p.body !== undefined && p.method !== 'GET' && p.method !== 'HEAD') init.body = p.body as RequestInit['body'];
  const res = await api.app.request(p.url, init);
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** Bad answers of the running test: collected rather than thrown, so one run lists every distinct failure. */
let failures: string[] = [];

async function check(p: Probe): Promise<void> {
  const res = await send(p);
  try {
    verify(p, res);
  } catch (err) {
    failures.push(err instanceof Error ? err.message : String(err));
  }
}

/** `it`, failing with every bad answer the body collected. */
function fuzz(name: string, fn: () => Promise<void>): void {
  it(name, async () => {
    failures = [];
    await fn();
    const found = failures;
    failures = [];
    if (found.length) {
      const shown = found.slice(0, 12).join('\n\n');
      throw new Error(
        `${found.length} bad answer(s) (base seed ${BASE_SEED}):\n\n${shown}${found.length > 12 ? `\n\n... and ${found.length - 12} more` : ''}`,
      );
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Routes, as data
// ---------------------------------------------------------------------------------------------

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
}

function jsonSchemaOf(schema: unknown): JsonSchema | undefined {
  if (!schema) return undefined;
  try {
    return z.toJSONSchema(schema as z.ZodType, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  } catch {
    return {};
  }
}

interface RouteInfo {
  id: string;
  method: string;
  /** OpenAPI path, with {param} placeholders. */
  path: string;
  params: string[];
  paramSchema?: JsonSchema;
  querySchema?: JsonSchema;
  bodySchema?: JsonSchema;
  /** Takes a request body (anything but GET, HEAD, DELETE without a body schema). */
  hasBody: boolean;
}

function describeRoute(m: RouteModule): RouteInfo {
  const r = m.route;
  const req = r.request;
  const content = (req?.body?.content ?? {}) as Record<string, { schema?: unknown }>;
  const jsonType = Object.keys(content).find((t) => /json/i.test(t));
  const method = r.method.toUpperCase();
  const bodySchema = jsonType ? jsonSchemaOf(content[jsonType]?.schema) : undefined;
  return {
    id: r.operationId ?? `${method} ${r.path}`,
    method,
    path: r.path,
    params: [...r.path.matchAll(/\{([^}]+)\}/g)].map((x) => x[1]!),
    paramSchema: jsonSchemaOf(req?.params),
    querySchema: jsonSchemaOf(req?.query),
    bodySchema,
    hasBody: Boolean(bodySchema) || !['GET', 'HEAD', 'DELETE'].includes(method),
  };
}

const INFOS = ROUTES.map(describeRoute);

function fillPath(path: string, values: Record<string, string>): string {
  return path.replace(/\{([^}]+)\}/g, (_, name: string) => values[name] ?? 'x');
}

// ---------------------------------------------------------------------------------------------
// Hostile values
// ---------------------------------------------------------------------------------------------

const HOSTILE_STRINGS = [
  '',
  ' ',
  '   \t\n ',
  '\u0000',
  'a\u0000b',
  '\uD800',
  'x\uDFFFy',
  '\uFEFF',
  '\u202Eevil',
  'é',
  'Ω≈ç√∫',
  '💥'.repeat(64),
  'ｆｕｌｌｗｉｄｔｈ',
  'a'.repeat(121),
  'a'.repeat(257),
  'a'.repeat(513),
  'a'.repeat(4096),
  '../../../../etc/passwd',
  '..%2f..%2f',
  '%00',
  '%',
  "' or 1=1 --",
  '"; drop table api_keys; --',
  '$1',
  '${jndi:ldap://x}',
  '<script>alert(1)</script>',
  '\r\nX-Injected: 1',
  'NaN',
  'Infinity',
  '-Infinity',
  '1e309',
  '-0',
  '0x10',
  '9007199254740993',
  'true',
  'null',
  'undefined',
  '[]',
  '{}',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
];

/** Date-times at the edges of what zod's ISO pattern accepts, of what Date parses and of what PostgreSQL stores. */
const HOSTILE_DATES = [
  '0000-01-01T00:00:00Z',
  '0000-01-01T00:00:01Z',
  '0000-01-01T00:00:00+23:59',
  '0001-01-01T00:00:00+01:00',
  '1969-12-31T23:59:59.999Z',
  '1970-01-01T00:00:00Z',
  '2000-02-29T00:00:00Z',
  '2024-02-29T12:00:00.123456789123Z',
  '2026-01-01T24:00:00Z',
  '2026-01-01T23:59:60Z',
  '2026-02-30T00:00:00Z',
  '2026-13-01T00:00:00Z',
  '2026-01-01',
  '2026-01-01T00:00:00',
  '2099-01-01T00:00:00Z',
  '2099-01-01T00:00:00-23:59',
  '9999-12-31T23:59:59.999Z',
  '9999-12-31T23:59:59-23:59',
  '+275760-09-13T00:00:00.000Z',
  '-271821-04-20T00:00:00.000Z',
];

const HOSTILE_NUMBERS = [
  0,
  -0,
  -1,
  1,
  0.5,
  -0.000001,
  2 ** 31,
  2 ** 32,
  Number.MAX_SAFE_INTEGER,
  Number.MAX_SAFE_INTEGER + 2,
  -Number.MAX_SAFE_INTEGER - 2,
  1e21,
  1e308,
  -1e308,
  Number.MAX_VALUE,
  Number.MIN_VALUE,
];

const hostileString = fc.oneof(
  { arbitrary: fc.constantFrom(...HOSTILE_STRINGS), weight: 3 },
  { arbitrary: fc.constantFrom(...HOSTILE_DATES), weight: 1 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 40 }), weight: 2 },
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }), weight: 1 },
);

const wildJson: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' }), weight: 3 },
  { arbitrary: hostileString, weight: 2 },
  { arbitrary: fc.constantFrom<unknown>(...HOSTILE_NUMBERS, true, false, null, [], {}), weight: 2 },
  { arbitrary: fc.array(fc.constantFrom(...HOSTILE_STRINGS), { maxLength: 12 }), weight: 1 },
);

function mutateCase(s: string): string {
  return s === s.toUpperCase() ? s.toLowerCase() : s.toUpperCase();
}

function typesOf(s: JsonSchema): string[] {
  if (Array.isArray(s.type)) return s.type;
  return s.type ? [s.type] : [];
}

/** An opaque token as pagination cursors often are: base64url of JSON, here with hostile contents. */
const OPAQUE_TOKENS = [
  ...HOSTILE_DATES.map((d) => [d, 'x']),
  ['2026-01-01T00:00:00Z', 'a\u0000'],
  ['2026-01-01T00:00:00Z', '\uD800'],
  ['2026-01-01T00:00:00Z', 'x'.repeat(300)],
  ['not a date', 'x'],
  [1, 2],
  [null, null],
  { __proto__: 1 },
  'x',
].map((v) => Buffer.from(JSON.stringify(v)).toString('base64url'));

function matches(pattern: string | undefined, v: string): boolean {
  try {
    return !pattern || new RegExp(pattern).test(v);
  } catch {
    return true;
  }
}

/**
 * Values the schema accepts, favouring the accepted values that handlers and the database find hard:
 * NUL bytes, lone surrogates, year 0000 and year 9999 with a negative offset, the bounds of every range.
 */
function validValue(s: JsonSchema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!s || depth > 4) return fc.constant(null);
  const alts = [...(s.anyOf ?? []), ...(s.oneOf ?? [])];
  if (alts.length) return fc.oneof(...alts.map((a) => validValue(a, depth + 1)));
  if (s.const !== undefined) return fc.constant(s.const);
  if (s.enum?.length) return fc.constantFrom(...s.enum);
  const t = typesOf(s)[0];
  if (t === 'string') {
    const min = s.minLength ?? 0;
    const max = Math.min(s.maxLength ?? 200, 4_096);
    const fits = (v: string) => v.length >= min && v.length <= max && matches(s.pattern, v);
    const options: fc.Arbitrary<string>[] = [];
    if (s.pattern) {
      try {
        options.push(fc.stringMatching(new RegExp(s.pattern), { size: 'small' }).filter(fits));
      } catch {
        /* a pattern JavaScript cannot compile */
      }
    }
    const edges = [
      ...HOSTILE_STRINGS,
      ...HOSTILE_DATES,
      ...OPAQUE_TOKENS,
      'a'.repeat(min),
      'a'.repeat(max),
      '💥'.repeat(Math.floor(max / 2)),
    ].filter(fits);
    if (edges.length) options.push(fc.constantFrom(...edges), fc.constantFrom(...edges));
    // What text columns refuse (NUL) or mangle (lone surrogates), wherever the schema lets it through.
    const unstorable = ['\u0000', 'a\u0000b', '\uD800', 'x\uDFFFy', `${'a'.repeat(Math.max(0, max - 1))}\u0000`].filter(
      fits,
    );
    if (unstorable.length) options.push(fc.constantFrom(...unstorable));
    if (s.format === 'date-time')
      options.push(
        fc
          .date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true })
          .map((d) => d.toISOString()),
      );
    else if (!s.pattern) {
      const c = { minLength: min, maxLength: Math.min(max, 64) };
      options.push(fc.oneof(fc.string({ unit: 'grapheme', ...c }), fc.string({ unit: 'binary', ...c })).filter(fits));
    }
    return options.length ? fc.oneof(...options) : fc.constant('a'.repeat(min));
  }
  if (t === 'integer' || t === 'number') {
    const min = Math.max(s.minimum ?? -(2 ** 31), Number.MIN_SAFE_INTEGER);
    const max = Math.min(s.maximum ?? 2 ** 31, Number.MAX_SAFE_INTEGER);
    const edges = fc.constantFrom(min, max, ...[0, -0, 1].filter((v) => v >= min && v <= max));
    return t === 'integer'
      ? fc.oneof(edges, fc.integer({ min: Math.max(min, -(2 ** 31)), max: Math.min(max, 2 ** 31) }))
      : fc.oneof(edges, fc.double({ min, max, noNaN: true }));
  }
  if (t === 'boolean') return fc.boolean();
  if (t === 'null') return fc.constant(null);
  if (t === 'array') {
    const item = validValue(s.items, depth + 1);
    const c = { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 5, 20) };
    // Unique items: a schema refinement against repeats is common and invisible in JSON Schema.
    return s.items?.enum ? fc.uniqueArray(item, c) : fc.array(item, c);
  }
  if (t === 'object') return validObject(s, depth + 1);
  return fc.constant(null);
}

/** An object the schema accepts: every required field, a random subset of the optional ones. */
function validObject(s: JsonSchema, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const props = s.properties ?? {};
  const required = new Set(s.required ?? []);
  const fields = Object.keys(props).map((name) =>
    fc
      .record({ present: required.has(name) ? fc.constant(true) : fc.boolean(), value: validValue(props[name], depth) })
      .map((f) => ({ name, ...f })),
  );
  return fc.tuple(...fields).map((fs) => Object.fromEntries(fs.filter((f) => f.present).map((f) => [f.name, f.value])));
}

/** A valid object with one field (present or not) replaced by a near or hostile value, or dropped. */
function mutatedObject(s: JsonSchema): fc.Arbitrary<Record<string, unknown>> {
  const names = Object.keys(s.properties ?? {});
  if (names.length === 0) return validObject(s);
  return fc
    .tuple(validObject(s), fc.constantFrom(...names))
    .chain(([obj, name]) =>
      fc.oneof(
        { arbitrary: nearValue(s.properties?.[name]).map((v) => ({ ...obj, [name]: v })), weight: 8 },
        { arbitrary: fc.constant(Object.fromEntries(Object.entries(obj).filter(([k]) => k !== name))), weight: 1 },
        { arbitrary: fc.constant({ ...obj, [mutateCase(name)]: obj[name] ?? 'x' }), weight: 1 },
      ),
    );
}

/**
 * Values near the schema: valid ones, values at and just past every bound, near-miss enum members,
 * and with some weight anything at all. Reaches the validators' edges and the handlers behind them.
 */
function nearValue(s: JsonSchema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!s || depth > 4) return wildJson;
  const options: fc.Arbitrary<unknown>[] = [];
  for (const alt of [...(s.anyOf ?? []), ...(s.oneOf ?? [])]) options.push(nearValue(alt, depth + 1));
  if (s.const !== undefined) options.push(fc.constant(s.const));
  if (s.enum?.length) {
    const members = s.enum;
    options.push(fc.constantFrom(...members));
    options.push(fc.constantFrom(...members).map((v) => (typeof v === 'string' ? mutateCase(v) : v)));
    options.push(fc.constantFrom(...members).map((v) => (typeof v === 'string' ? ` ${v}` : v)));
  }
  for (const t of typesOf(s)) {
    if (t === 'string') {
      const min = s.minLength ?? 0;
      const max = s.maxLength ?? 64;
      if (s.format === 'date-time')
        options.push(
          fc.constantFrom(...HOSTILE_DATES),
          fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
        );
      if (s.pattern) {
        try {
          options.push(fc.stringMatching(new RegExp(s.pattern), { size: 'small' }));
        } catch {
          /* a pattern JavaScript cannot compile */
        }
      }
      if (!s.format && !s.pattern && !s.enum) {
        options.push(fc.string({ unit: 'grapheme', minLength: min, maxLength: Math.min(max, 200) }));
        options.push(fc.constantFrom(Math.max(0, min - 1), max, max + 1).map((n) => 'a'.repeat(n)));
        options.push(fc.constantFrom(max, max + 1).map((n) => 'é'.repeat(n)));
      }
      options.push(hostileString);
    } else if (t === 'integer' || t === 'number') {
      const min = s.minimum ?? -(2 ** 31);
      const max = s.maximum ?? 2 ** 31;
      options.push(fc.constantFrom(min - 1, min, max, max + 1, ...HOSTILE_NUMBERS));
      options.push(fc.integer({ min: Math.max(min, -(2 ** 31)), max: Math.min(max, 2 ** 31) }));
      options.push(fc.double({ noNaN: true, noDefaultInfinity: true }));
      options.push(fc.constantFrom<unknown>('1', '1e3', ' 1', '', null, true));
    } else if (t === 'boolean') {
      options.push(fc.boolean(), fc.constantFrom<unknown>('true', 0, 1, null));
    } else if (t === 'null') {
      options.push(fc.constant(null));
    } else if (t === 'array') {
      const item = nearValue(s.items, depth + 1);
      const maxItems = Math.min(s.maxItems ?? 8, 40);
      options.push(fc.array(item, { minLength: 0, maxLength: maxItems + 1 }));
      options.push(item.map((v) => [v, v]));
      options.push(fc.constantFrom<unknown>([], [null], 'not an array', {}));
    } else if (t === 'object') {
      options.push(nearObject(s, depth + 1));
    }
  }
  if (options.length === 0) return wildJson;
  return fc.oneof({ arbitrary: fc.oneof(...options), weight: 5 }, { arbitrary: wildJson, weight: 1 });
}

const EXTRA_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'Name',
  'NAME',
  'id',
  'tenantId',
  '',
  ' ',
  'a.b',
  '\u0000',
  'é',
];

/** An object with the schema's properties (a random subset, required ones mostly present), sometimes an extra key. */
function nearObject(s: JsonSchema, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const props = s.properties ?? {};
  const names = Object.keys(props);
  const required = new Set(s.required ?? []);
  const fields = names.map((name) =>
    // A required field is left out one time in ten, an optional one half the time.
    fc
      .record({ roll: fc.integer({ min: 0, max: 9 }), value: nearValue(props[name], depth) })
      .map((f) => ({ name, present: required.has(name) ? f.roll > 0 : f.roll >= 5, value: f.value })),
  );
  const extra = fc.option(fc.tuple(fc.oneof(fc.constantFrom(...EXTRA_KEYS), fc.string({ maxLength: 12 })), wildJson), {
    freq: 4,
  });
  return fc.tuple(fc.tuple(...fields), extra).map(([fs, ex]) => {
    const out: Record<string, unknown> = {};
    for (const f of fs) if (f.present) out[f.name] = f.value;
    // defineProperty, so "__proto__" becomes an own key that JSON.stringify writes out.
    if (ex) Object.defineProperty(out, ex[0], { value: ex[1], enumerable: true, configurable: true, writable: true });
    return out;
  });
}

/** Raw JSON fragments that JSON.stringify cannot produce: huge literals, duplicate keys, "__proto__". */
function hostileFragments(keys: string[]): string[] {
  const k = keys.length ? keys : ['name'];
  const out = [
    '"__proto__":{"polluted":true,"isAdmin":true}',
    '"constructor":{"prototype":{"polluted":true}}',
    '"__proto__":null',
  ];
  for (const key of k) {
    const q = JSON.stringify(key);
    out.push(
      `${q}:1e400`,
      `${q}:-1e400`,
      `${q}:123456789012345678901234567890123456789`,
      `${q}:1.0`,
      `${q}:-0`,
      `${q}:1E2`,
      `${q}:"\\u0000"`,
      `${q}:"\\ud800"`,
      `${q}:{"__proto__":{"polluted":true}}`,
      `${q}:[${'['.repeat(200)}${']'.repeat(200)}]`,
      `${q}:null,${q}:"duplicate"`,
    );
  }
  return out;
}

/** Splices a raw fragment into a JSON object text. */
function splice(objectText: string, fragment: string): string {
  if (!objectText.startsWith('{')) return `{${fragment}}`;
  return objectText === '{}' ? `{${fragment}}` : `{${fragment},${objectText.slice(1)}`;
}

function deepNesting(depth: number, kind: 'array' | 'object'): string {
  return kind === 'array'
    ? `${'['.repeat(depth)}${']'.repeat(depth)}`
    : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

/** A JSON body text for the route: near-valid, random, hostile-spliced, deeply nested or huge. */
function bodyText(info: RouteInfo): fc.Arbitrary<string> {
  const schema = info.bodySchema;
  const keys = Object.keys(schema?.properties ?? {});
  const near = schema ? nearValue(schema) : wildJson;
  return fc.oneof(
    { arbitrary: (schema ? validObject(schema) : wildJson).map((v) => JSON.stringify(v) ?? 'null'), weight: 2 },
    { arbitrary: (schema ? mutatedObject(schema) : wildJson).map((v) => JSON.stringify(v) ?? 'null'), weight: 6 },
    { arbitrary: near.map((v) => JSON.stringify(v) ?? 'null'), weight: 2 },
    { arbitrary: wildJson.map((v) => JSON.stringify(v) ?? 'null'), weight: 2 },
    {
      arbitrary: fc
        .tuple(near, fc.constantFrom(...hostileFragments(keys)))
        .map(([v, frag]) => splice(JSON.stringify(v) ?? '{}', frag)),
      weight: 3,
    },
    {
      arbitrary: fc
        .tuple(
          fc.integer({ min: 10, max: 7000 }),
          fc.constantFrom<'array' | 'object'>('array', 'object'),
          fc.constantFrom(...keys, ''),
        )
        .map(([d, kind, key]) => {
          const nested = deepNesting(d, kind);
          return key ? `{${JSON.stringify(key)}:${nested}}` : nested;
        }),
      weight: 1,
    },
    {
      // Over every route's cap (16 KiB is the default; 128 KiB, on avatar create and update, the largest).
      arbitrary: fc
        .constantFrom(20_000, 70_000, 140_000)
        .map((n) => JSON.stringify({ [keys[0] ?? 'name']: 'x'.repeat(n) })),
      weight: 1,
    },
  );
}

/** Whether a schema admits values of JSON type `t` (an integer field admits numbers' hostile values too). */
function admits(s: JsonSchema | undefined, t: string): boolean {
  if (!s) return false;
  if ([...(s.anyOf ?? []), ...(s.oneOf ?? [])].some((a) => admits(a, t))) return true;
  const types = typesOf(s);
  return types.includes(t) || (t === 'number' && types.includes('integer'));
}

const utf8 = (...parts: (string | number[])[]) =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p))));

/**
 * Raw JSON values a text field must refuse by name (422, `field`), never store as U+FFFD: lone
 * surrogates as JSON escapes, and invalid UTF-8 bytes inside the string.
 */
const NOT_TEXT: [string, Buffer][] = [
  ['a lone high surrogate', utf8('"a\\ud800b"')],
  ['a lone low surrogate', utf8('"\\udfff"')],
  ['an invalid UTF-8 byte', utf8('"a', [0xff], 'b"')],
  ['an overlong UTF-8 sequence', utf8('"', [0xc0, 0xaf], '"')],
  ['a UTF-8 encoded surrogate', utf8('"', [0xed, 0xa0, 0x80], '"')],
  ['a truncated UTF-8 sequence', utf8('"x', [0xe2, 0x82], '"')],
];
/** Raw JSON numbers past a double: parsed as ±Infinity, refused as out of range by name. */
const HUGE_NUMBERS: [string, Buffer][] = ['1e309', '-1e309', `1${'0'.repeat(400)}`].map((n) => [n, utf8(n)]);

/** What each refusal says after `Invalid field "<field>" in body: `. */
const NOT_TEXT_MESSAGE = 'must not contain unpaired UTF-16 surrogates or invalid UTF-8';
const HUGE_NUMBER_MESSAGE = 'the number is out of range';

/** The bytes of `obj` as JSON with the value of `field` replaced by the raw JSON `raw`. */
function withRawField(obj: Record<string, unknown>, field: string, raw: Buffer): Buffer {
  const marker = '\u0001FUZZ\u0001';
  const [before, after] = JSON.stringify({ ...obj, [field]: marker }).split(JSON.stringify(marker));
  return Buffer.concat([utf8(before!), raw, utf8(after!)]);
}

/**
 * Per route: each top-level text field with each of NOT_TEXT, each number field with each of
 * HUGE_NUMBERS, and every field with a number past a double (what a field of free JSON could
 * otherwise store as null). `control`: the same field with a harmless value of its type, which
 * tells whether the field has a rule of its own that refuses the probe first (a set of values, a
 * format, a length, a rule across fields); `message` is what the probe must say otherwise (none
 * for a field with a pattern of allowed characters: its own refusal says what is wrong).
 */
function untextCases(
  info: RouteInfo,
): { field: string; what: string; raw: Buffer; control: Buffer; message?: string }[] {
  const props = Object.entries(info.bodySchema?.properties ?? {});
  // A pattern of allowed characters refuses what is not text itself, in its own words.
  const patterned = (s: JsonSchema): boolean =>
    Boolean(s.pattern) || [...(s.anyOf ?? []), ...(s.oneOf ?? [])].some(patterned);
  return [
    ...props
      .filter(([, s]) => admits(s, 'string'))
      .flatMap(([field, s]) =>
        NOT_TEXT.map(([what, raw]) => ({
          field,
          what,
          raw,
          control: utf8('"abc"'),
          ...(patterned(s) ? {} : { message: NOT_TEXT_MESSAGE }),
        })),
      ),
    ...props.flatMap(([field, s]) =>
      HUGE_NUMBERS.map(([what, raw]) => ({
        field,
        what,
        raw,
        control: utf8(admits(s, 'number') ? '1' : 'true'),
        message: HUGE_NUMBER_MESSAGE,
      })),
    ),
  ];
}

/**
 * The refusal of a hostile field: a 422 (validation runs before any handler, so nothing can be
 * stored). When it names the field, it says what is wrong with it, unless the control (the same
 * body with a harmless value there) is refused naming the field too: then a rule of the field's
 * own came first.
 */
function expectRefused(p: Probe, res: Answer, control: Answer, field: string, message: string | undefined): void {
  // 413: a body the generator made over the route's cap, refused before it is parsed.
  if (res.status === 413) return;
  if (res.status !== 422)
    return void failures.push(
      `expected 422, got ${res.status} for ${describeProbe(p)}\nresponse: ${clip(res.text, 300)}`,
    );
  const body = JSON.parse(res.text) as { field?: string; error?: string };
  const ownRule = control.status === 422 && (JSON.parse(control.text) as { field?: string }).field === field;
  if (message && body.field === field && !ownRule && body.error !== `Invalid field "${field}" in body: ${message}`)
    failures.push(`wrong message for ${describeProbe(p)}: ${body.error}`);
}

// ---------------------------------------------------------------------------------------------
// Authorization headers, content types, queries, paths, methods
// ---------------------------------------------------------------------------------------------

function isHeaderValue(v: string): boolean {
  try {
    new Headers({ a: v });
    return true;
  } catch {
    return false;
  }
}

const GARBAGE_AUTH = [
  '',
  ' ',
  'Bearer',
  'Bearer ',
  'Bearer  ',
  'bearer',
  'Bearer svc_',
  'Bearer svc__',
  'Bearer svc___',
  'Bearer svc_live_',
  'Bearer svc_test_',
  `Bearer svc_live_${'a'.repeat(64)}`,
  `Bearer svc_test_${'0'.repeat(16)}`,
  `Bearer svc_live_${'-_'.repeat(64)}`,
  `Bearer svc_live_${'a'.repeat(129)}`,
  `Bearer svc_${'A'.repeat(16)}_${'b'.repeat(43)}`,
  `Bearer svc_${'A'.repeat(16)}_${'b'.repeat(129)}`,
  `Bearer svc_${'A'.repeat(15)}_${'b'.repeat(43)}`,
  `Bearer svc_legacy${'A'.repeat(10)}_${'b'.repeat(43)}`,
  `Bearer sk-${'a'.repeat(48)}`,
  'Bearer null',
  'Bearer undefined',
  'Bearer [object Object]',
  'Basic dXNlcjpwYXNz',
  'Token svc_abc',
  'Bearer svc_abc def',
  'Bearer\tsvc_abc',
  `Bearer ${'x'.repeat(70_000)}`,
  `Bearer svc_${'A'.repeat(16)}_${'b'.repeat(20_000)}`,
  `Bearer ${' '.repeat(10_000)}x`,
  `Bearer ${'a '.repeat(5_000)}`,
  'Bearer \u00e9\u00e8\u00ff',
  `Bearer svc_${'\u00e9'.repeat(16)}_${'\u00ff'.repeat(43)}`,
  'Bearer \u0080\u0081',
];

/** Variations of a valid key: some must still authenticate, the others must be a clean 401. */
function keyVariants(key: string): string[] {
  return [
    `Bearer ${key}`,
    `bearer ${key}`,
    `BEARER    ${key}   `,
    `Bearer ${key}x`,
    `Bearer ${key.slice(0, -1)}`,
    `Bearer ${key.toUpperCase()}`,
    `Bearer ${key} ${key}`,
    `Bearer ${key}, Bearer ${key}`,
    `Bearer ${key}\u00e9`,
    `Basic ${Buffer.from(`${key}:`).toString('base64')}`,
    key,
    `Bearer ${key.replace('svc_', 'svc_live_')}`,
    `Bearer ${key.replace(/_([^_]+)$/, '_')}`,
  ];
}

function authHeader(): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 1 },
    { arbitrary: fc.constantFrom(...GARBAGE_AUTH), weight: 4 },
    { arbitrary: fc.constantFrom(...keyVariants(validKey)), weight: 3 },
    {
      arbitrary: fc
        .string({ unit: 'binary-ascii', maxLength: 200 })
        .map((s) => `Bearer ${s}`)
        .filter(isHeaderValue),
      weight: 2,
    },
    { arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 200 }).filter(isHeaderValue), weight: 1 },
    { arbitrary: fc.stringMatching(/^svc_[0-9A-Za-z_-]{0,80}$/).map((s) => `Bearer ${s}`), weight: 2 },
  );
}

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/JSON',
  'application/json; charset=utf-16',
  'application/json;;',
  'application/json, text/plain',
  'application/vnd.api+json',
  'application/x-json',
  'text/json',
  'text/plain',
  'text/html',
  'application/xml',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
  'multipart/form-data; boundary=----x',
  'application/octet-stream',
  '*/*',
  '',
  ' ',
  'application/json\u00e9',
];

const rawBytes = fc.oneof(
  fc.uint8Array({ maxLength: 2_000 }),
  fc.constantFrom(
    new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d]), // BOM + {}
    new Uint8Array([0xff, 0xfe, 0x7b, 0x00, 0x7d, 0x00]), // UTF-16 LE {}
    new Uint8Array([0xc0, 0xaf, 0xed, 0xa0, 0x80]), // overlong and surrogate UTF-8
    new Uint8Array([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]), // {"n":"\xff"}
    new Uint8Array(0),
  ),
  fc
    .constantFrom(
      '{',
      '}',
      '{"a":',
      '[1,2',
      'nul',
      'tru',
      '"unterminated',
      "{'a':1}",
      '{a:1}',
      '{"a":1,}',
      'NaN',
      '\u0000',
      '  ',
      'a=1&b=2',
      '<x/>',
    )
    .map((s) => new TextEncoder().encode(s)),
);

/** encodeURIComponent, except that a lone surrogate becomes its (invalid) CESU-8 bytes instead of throwing. */
function uriEncode(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return [...s]
      .map((ch) => {
        const c = ch.charCodeAt(0);
        if (ch.length === 1 && c >= 0xd800 && c <= 0xdfff)
          return `%${(0xe0 | (c >> 12)).toString(16)}%${(0x80 | ((c >> 6) & 0x3f)).toString(16)}%${(0x80 | (c & 0x3f)).toString(16)}`.toUpperCase();
        return encodeURIComponent(ch);
      })
      .join('');
  }
}

/** Query strings: the schema's keys with near-valid and hostile values, duplicates, brackets, broken escapes. */
function queryString(info: RouteInfo): fc.Arbitrary<string> {
  const props = info.querySchema?.properties ?? {};
  const names = Object.keys(props);
  const keyArb = fc.oneof(
    { arbitrary: names.length ? fc.constantFrom(...names) : fc.constant('q'), weight: 5 },
    {
      arbitrary: fc.constantFrom(
        ...names.map((n) => `${n}[]`),
        ...names.map((n) => `${n}[0]`),
        ...names.map(mutateCase),
        ...EXTRA_KEYS,
        'a',
      ),
      weight: 2,
    },
    { arbitrary: fc.string({ unit: 'grapheme', maxLength: 10 }), weight: 1 },
  );
  const valueFor = (key: string) => {
    const base = props[key.replace(/\[.*$/, '')];
    return fc.oneof(
      { arbitrary: nearValue(base).map((v) => (typeof v === 'string' ? v : (JSON.stringify(v) ?? ''))), weight: 4 },
      { arbitrary: hostileString, weight: 2 },
      {
        arbitrary: fc.constantFrom(
          '',
          '1e400',
          '-1',
          '0',
          '101',
          '1.5',
          '00001',
          ' 5',
          '5 ',
          '0x1',
          '1_000',
          'Infinity',
          '9'.repeat(400),
        ),
        weight: 2,
      },
      { arbitrary: fc.constantFrom('x'.repeat(600), 'x'.repeat(9_000)), weight: 1 },
    );
  };
  const encoding = fc.constantFrom<'component' | 'raw' | 'plus' | 'broken'>(
    'component',
    'component',
    'raw',
    'plus',
    'broken',
  );
  const pair = keyArb.chain((k) =>
    fc.tuple(fc.constant(k), valueFor(k), encoding, fc.constantFrom('kv', 'kv', 'kv', 'k', 'k=', '=v')),
  );
  const enc = (s: string, how: string) => {
    if (how === 'raw') return s.replace(/[#&\s%]/g, (c) => uriEncode(c));
    if (how === 'plus') return uriEncode(s).replace(/%20/g, '+');
    if (how === 'broken') return `${uriEncode(s)}${['%', '%z', '%zz', '%C0%AF', '%00', '%ff', '%E2%82'][s.length % 7]}`;
    return uriEncode(s);
  };
  const chaotic = fc.array(pair, { minLength: 0, maxLength: 8 }).chain((pairs) =>
    fc.constantFrom('', '&', '&&').map((sep) => {
      const parts = pairs.map(([k, v, how, form]) => {
        if (form === 'k') return enc(k, how);
        if (form === 'k=') return `${enc(k, how)}=`;
        if (form === '=v') return `=${enc(v, how)}`;
        return `${enc(k, how)}=${enc(v, how)}`;
      });
      return `?${sep}${parts.join('&')}`;
    }),
  );
  if (!info.querySchema || names.length === 0) return chaotic;
  // Accepted (or one-field-off) queries, so the handler and the database see the hostile values.
  const asText = (v: unknown) => (typeof v === 'string' ? v : (JSON.stringify(v) ?? ''));
  const schemaShaped = fc
    .oneof(validObject(info.querySchema), mutatedObject(info.querySchema), mutatedObject(info.querySchema))
    .map(
      (o) =>
        `?${Object.entries(o)
          .map(([k, v]) => `${uriEncode(k)}=${uriEncode(asText(v))}`)
          .join('&')}`,
    );
  return fc.oneof({ arbitrary: schemaShaped, weight: 3 }, { arbitrary: chaotic, weight: 2 });
}

const PARAM_VALUES = [
  'x',
  '0',
  '-1',
  'null',
  'undefined',
  '%00',
  '%2e%2e',
  '..%2f..%2f',
  '%2f',
  '%zz',
  '%C0%AF',
  '%E2%80%AE',
  encodeURIComponent('💥'),
  encodeURIComponent("' or 1=1 --"),
  encodeURIComponent('__proto__'),
  'constructor',
  `ava_${'A'.repeat(20)}`,
  `svc_${'A'.repeat(16)}`,
  'a'.repeat(300),
  'a'.repeat(10_000),
  'é',
  '~',
  ';x=1',
];

function paramValue(info: RouteInfo, name: string): fc.Arbitrary<string> {
  const schema = info.paramSchema?.properties?.[name];
  return fc.oneof(
    { arbitrary: fc.constantFrom(...PARAM_VALUES), weight: 3 },
    {
      arbitrary: nearValue(schema).map((v) => uriEncode(typeof v === 'string' ? v : (JSON.stringify(v) ?? ''))),
      weight: 2,
    },
    {
      arbitrary: validValue(schema ?? { type: 'string' }).map((v) =>
        uriEncode(typeof v === 'string' ? v : (JSON.stringify(v) ?? '')),
      ),
      weight: 2,
    },
    { arbitrary: fc.webSegment(), weight: 1 },
  );
}

function pathFor(info: RouteInfo): fc.Arbitrary<string> {
  if (info.params.length === 0) return fc.constant(info.path);
  return fc
    .tuple(...info.params.map((p) => paramValue(info, p)))
    .map((vals) => fillPath(info.path, Object.fromEntries(info.params.map((p, i) => [p, vals[i]!]))));
}

const PATH_SUFFIXES = [
  '/',
  '//',
  '/..',
  '/..%2f',
  '/..%2f..%2fetc%2fpasswd',
  '/%2e%2e/',
  '%00',
  '/%00',
  '%2f',
  '/x',
  '.json',
  ';jsessionid=1',
  '%20',
  '/%zz',
  '/%C0%AF',
  `/${'a'.repeat(5_000)}`,
  'a'.repeat(20_000),
  '/~',
  '/*',
  '#fragment',
];

const METHODS = [
  'GET',
  'POST',
  'PUT',
  'PATCH',
  'DELETE',
  'HEAD',
  'OPTIONS',
  'PROPFIND',
  'FOO',
  'patch',
  'QUERY',
  'X-CUSTOM',
  'M-SEARCH',
];

function headersOf(auth: string | undefined, extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = { ...extra };
  if (auth !== undefined) h.authorization = auth;
  return h;
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

/** Error-level log lines of the app under test (the hang-up probes want none). */
let errorLogs: string[] = [];
const errorSink = new Writable({
  write(chunk: Buffer, _enc, cb) {
    errorLogs.push(chunk.toString());
    cb();
  },
});

beforeAll(async () => {
  // No throttle in the way: the probes send many bad keys from one address (the made-up-key flood has its own section).
  api = await testApi({
    env: { RATE_LIMIT_POINTS: '1000000', AUTH_FAILURE_LIMIT_POINTS: '1000000' },
    log: pino({ level: 'error' }, errorSink),
  });
  validKey = (await api.newTenant({ credits: 1_000 })).apiKey;
});

afterAll(async () => {
  await api?.close();
  if (process.env.FUZZ_SUMMARY) {
    const lines = [...stats].map(
      ([kind, m]) =>
        `${kind.padEnd(48)} ${[...m]
          .sort((a, b) => a[0] - b[0])
          .map(([s, n]) => `${s}x${n}`)
          .join(' ')}`,
    );
    console.error(`fuzz summary (status x count):\n${lines.join('\n')}`);
  }
});

describe('fuzz: route list', () => {
  it('covers every route of ROUTES', () => {
    expect(INFOS.length).toBeGreaterThan(0);
    for (const info of INFOS) expect(info.path.startsWith(V1), info.id).toBe(true);
  });
});

for (const info of INFOS) {
  describe(`fuzz ${info.method} ${info.path}`, () => {
    const name = (what: string) => `${info.id}: ${what}`;

    if (info.hasBody) {
      fuzz('random, hostile, nested and huge JSON bodies with a valid key', async () => {
        await fc.assert(
          fc.asyncProperty(
            pathFor(info),
            bodyText(info),
            fc.constantFrom('application/json', 'application/json; charset=utf-8'),
            async (path, body, ct) => {
              await check({
                kind: name('json body'),
                method: info.method,
                url: path,
                headers: headersOf(`Bearer ${validKey}`, { 'content-type': ct }),
                body,
              });
            },
          ),
          { seed: seedOf(name('json body')), numRuns: runs(110) },
        );
      });

      const untext = untextCases(info);
      if (untext.length > 0 && info.bodySchema) {
        fuzz(
          'text fields with lone surrogates or invalid UTF-8, number fields past a double: 422 naming the field',
          async () => {
            await fc.assert(
              fc.asyncProperty(validObject(info.bodySchema!), fc.constantFrom(...untext), async (base, c) => {
                const p: Probe = {
                  kind: name('not text'),
                  method: info.method,
                  url: fillPath(info.path, {}),
                  headers: headersOf(`Bearer ${validKey}`, { 'content-type': 'application/json' }),
                  body: withRawField(base, c.field, c.raw),
                };
                const res = await send(p);
                try {
                  verify(p, res);
                } catch (err) {
                  failures.push(err instanceof Error ? err.message : String(err));
                }
                const control = await send({ ...p, body: withRawField(base, c.field, c.control) });
                expectRefused({ ...p, kind: `${p.kind}: ${c.field} with ${c.what}` }, res, control, c.field, c.message);
              }),
              { seed: seedOf(name('not text')), numRuns: runs(Math.min(80, untext.length * 2)) },
            );
          },
        );
      }

      fuzz('non-JSON bytes and wrong content types', async () => {
        const payload = fc.oneof(rawBytes, bodyText(info));
        await fc.assert(
          fc.asyncProperty(
            fc.option(fc.constantFrom(...CONTENT_TYPES), { freq: 6 }),
            payload,
            fc.boolean(),
            async (ct, body, authed) => {
              const headers = headersOf(
                authed ? `Bearer ${validKey}` : undefined,
                ct === null ? {} : { 'content-type': ct },
              );
              await check({
                kind: name('bytes and content types'),
                method: info.method,
                url: fillPath(info.path, {}),
                headers,
                body,
              });
            },
          ),
          { seed: seedOf(name('bytes')), numRuns: runs(50) },
        );
      });
    }

    fuzz('random query strings', async () => {
      await fc.assert(
        fc.asyncProperty(
          pathFor(info),
          queryString(info),
          fc.integer({ min: 0, max: 9 }),
          async (path, query, roll) => {
            const headers = headersOf(roll > 0 ? `Bearer ${validKey}` : undefined);
            const body = info.hasBody ? '{}' : undefined;
            if (body) headers['content-type'] = 'application/json';
            await check({ kind: name('query'), method: info.method, url: path + query, headers, body });
          },
        ),
        { seed: seedOf(name('query')), numRuns: runs(info.hasBody ? 40 : 150) },
      );
    });

    fuzz('path params, odd suffixes and case', async () => {
      const suffix = fc.oneof(fc.constant(''), fc.constantFrom(...PATH_SUFFIXES));
      const casing = fc.constantFrom<'as-is' | 'upper' | 'double-slash'>('as-is', 'as-is', 'upper', 'double-slash');
      await fc.assert(
        fc.asyncProperty(pathFor(info), suffix, casing, async (path, sfx, how) => {
          let p = path + sfx;
          if (how === 'upper') p = p.toUpperCase();
          if (how === 'double-slash') p = p.replace(`${V1}/`, `${V1}//`);
          const headers = headersOf(`Bearer ${validKey}`, info.hasBody ? { 'content-type': 'application/json' } : {});
          await check({
            kind: name('path'),
            method: info.method,
            url: p,
            headers,
            body: info.hasBody ? '{}' : undefined,
          });
        }),
        { seed: seedOf(name('path')), numRuns: runs(30) },
      );
    });

    fuzz('garbage, edge-case and valid-looking Authorization headers', async () => {
      const body = info.hasBody ? fc.option(bodyText(info), { freq: 3 }) : fc.constant(null);
      await fc.assert(
        fc.asyncProperty(authHeader(), body, async (auth, b) => {
          const headers = headersOf(auth, b === null ? {} : { 'content-type': 'application/json' });
          await check({
            kind: name('authorization'),
            method: info.method,
            url: fillPath(info.path, {}),
            headers,
            body: b ?? undefined,
          });
        }),
        { seed: seedOf(name('auth')), numRuns: runs(45) },
      );
    });

    fuzz('other methods on the route path', async () => {
      for (const method of METHODS.filter((m) => m !== info.method)) {
        for (const auth of [undefined, `Bearer ${validKey}`]) {
          await check({
            kind: name('other methods'),
            method,
            url: fillPath(info.path, {}),
            headers: headersOf(auth, { 'content-type': 'application/json' }),
            body: '{}',
          });
        }
      }
    });
  });
}

describe('fuzz: unknown paths and methods', () => {
  fuzz('answers unknown paths under /api/v1 and elsewhere with a 404 or 405 body', async () => {
    const segment = fc.oneof(
      fc.webSegment(),
      fc.constantFrom(...PARAM_VALUES),
      fc.string({ unit: 'grapheme', maxLength: 12 }).map(uriEncode),
    );
    const path = fc.oneof(
      { arbitrary: fc.array(segment, { minLength: 0, maxLength: 6 }).map((s) => `${V1}/${s.join('/')}`), weight: 4 },
      { arbitrary: fc.array(segment, { minLength: 0, maxLength: 4 }).map((s) => `/${s.join('/')}`), weight: 1 },
      {
        arbitrary: fc.constantFrom(
          '/api',
          '/api/',
          '/api/v2/credits/balance',
          '/api/V1/credits/balance',
          '/v1/credits/balance',
          `${V1}`,
          `${V1}/`,
          `${V1}%2fcredits%2fbalance`,
          '/%00',
          '/%',
          `/${'a'.repeat(20_000)}`,
        ),
        weight: 1,
      },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...METHODS),
        path,
        fc.option(authHeader(), { freq: 2 }),
        async (method, p, auth) => {
          await check({
            kind: 'unknown path',
            method,
            url: p,
            headers: headersOf(auth ?? undefined, { 'content-type': 'application/json' }),
            body: '{"a":1}',
          });
        },
      ),
      { seed: seedOf('unknown paths'), numRuns: runs(150) },
    );
  });

  it('does not pollute Object.prototype', () => {
    const probe = {} as Record<string, unknown>;
    expect(probe.polluted).toBeUndefined();
    expect(probe.isAdmin).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------
// Over real HTTP: what a Request object cannot carry (raw UTF-8 header bytes, unnormalised paths,
// TRACE, unparseable URLs and Host headers), and clients that stall, trickle or hang up
// ---------------------------------------------------------------------------------------------

interface RawAnswer extends Answer {
  raw: string;
  /** From the connection's open to its close. */
  ms: number;
}

/**
 * Opens a connection, lets `talk` write to it (over time, if it likes) and reads the answer to the
 * connection's close: 'closed' when it closed without a byte. Rejects when it is still open after
 * `withinMs`: a server that holds a client is a failure too.
 */
function rawTalk(
  port: number,
  talk: (socket: net.Socket, closed: Promise<void>) => unknown,
  withinMs = 10_000,
): Promise<RawAnswer | 'closed'> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const start = performance.now();
    const closed = new Promise<void>((done) => socket.on('close', () => done()));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection was still open after ${withinMs} ms`));
    }, withinMs);
    // write, not end: a half-closed client makes Node drop the socket before an async answer.
    socket.on('connect', () => void Promise.resolve(talk(socket, closed)).catch(() => {}));
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => {});
    void closed.then(() => {
      clearTimeout(timer);
      let all = Buffer.concat(chunks);
      if (all.length === 0) return resolve('closed');
      // Interim answers (100 Continue) come before the answer.
      while (/^HTTP\/1\.[01] 1\d\d /.test(all.subarray(0, 16).toString('latin1')) && all.includes('\r\n\r\n'))
        all = all.subarray(all.indexOf('\r\n\r\n') + 4);
      const split = all.indexOf('\r\n\r\n');
      const headText = all.subarray(0, split === -1 ? all.length : split).toString('latin1');
      let payload = split === -1 ? Buffer.alloc(0) : all.subarray(split + 4);
      const [statusLine, ...lines] = headText.split('\r\n');
      const headers = new Map<string, string>();
      for (const l of lines) {
        const i = l.indexOf(':');
        if (i > 0) headers.set(l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim());
      }
      if (headers.get('transfer-encoding')?.includes('chunked')) {
        const parts: Buffer[] = [];
        let off = 0;
        for (;;) {
          const eol = payload.indexOf('\r\n', off);
          if (eol === -1) break;
          const size = parseInt(payload.subarray(off, eol).toString('latin1'), 16);
          if (!size) break;
          parts.push(payload.subarray(eol + 2, eol + 2 + size));
          off = eol + 2 + size + 2;
        }
        payload = Buffer.concat(parts);
      }
      resolve({
        status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0),
        headers: { get: (n: string) => headers.get(n.toLowerCase()) ?? null },
        text: payload.toString('utf8'),
        raw: headText,
        ms: performance.now() - start,
      });
    });
  });
}

const rawHttp = (port: number, head: string, body: Buffer = Buffer.alloc(0)) =>
  rawTalk(port, (socket) => socket.write(Buffer.concat([Buffer.from(head, 'latin1'), body])));

/** `bytes` written `size` at a time, `everyMs` apart, until the connection closes. */
async function trickle(
  socket: net.Socket,
  closed: Promise<void>,
  bytes: Buffer,
  size: number,
  everyMs: number,
): Promise<void> {
  let open = true;
  void closed.then(() => (open = false));
  for (let i = 0; i < bytes.length && open; i += size) {
    socket.write(bytes.subarray(i, i + size));
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * The real server's bounds, shortened so that a stalled probe is answered within a second or two:
 * a head within 800 ms, a whole request within 3 s, a body advancing by 100 bytes/s over any 500 ms.
 */
const RAW_LIMITS: HttpLimits = {
  headersTimeoutMs: 800,
  requestTimeoutMs: 3000,
  bodyStallMs: 500,
  bodyMinBytesPerSecond: 100,
};

describe('fuzz over real HTTP', () => {
  let server: ApiServer;
  let port = 0;

  /** The app's answers still being made: a request whose client hung up ends there, after its connection. */
  const answering = new Set<Promise<unknown>>();

  beforeAll(async () => {
    // The server `npm start` runs (api/server.ts): what Node's parser and the adapter refuse is
    // answered there, and so are stalled requests.
    const fetch: typeof api.app.fetch = (req, env) => {
      const answer = Promise.resolve(api.app.fetch(req, env));
      answering.add(answer);
      void answer.finally(() => answering.delete(answer)).catch(() => {});
      return answer;
    };
    server = await startApiServer(fetch, { port: 0, hostname: '127.0.0.1', limits: RAW_LIMITS, log: api.services.log });
    port = server.port;
  });

  afterAll(async () => {
    await server?.close({ timeoutMs: 1000 });
  });

  /** Checks one raw answer against the invariant: whatever the parser, the adapter or the app answered. */
  function checkRaw(probe: Probe, res: RawAnswer | 'closed'): void {
    if (res === 'closed') {
      failures.push(`connection closed without an answer: ${describeProbe(probe)}`);
      return;
    }
    try {
      verify(probe, res);
    } catch (err) {
      failures.push(err instanceof Error ? err.message : String(err));
    }
  }

  /**
   * Sends one raw request: its request line, a Host header (`host`; null: none) and `headers`.
   * Whatever refuses it (Node's parser, the request adapter, the app), the answer is the error body.
   */
  async function rawCheck(
    kind: string,
    method: string,
    target: string,
    headers: string[],
    body: string | Buffer = '',
    o: { host?: string | null; version?: string } = {},
  ): Promise<RawAnswer | undefined> {
    const bodyBytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const host = o.host === undefined ? '127.0.0.1' : o.host;
    const lines = [
      `${method} ${target} ${o.version ?? 'HTTP/1.1'}`,
      ...(host === null ? [] : [`Host: ${host}`]),
      'Connection: close',
      ...headers,
    ];
    if (bodyBytes.length) lines.push('Content-Type: application/json', `Content-Length: ${bodyBytes.length}`);
    // The head goes out as latin1, so a header holding UTF-8 bytes is written as "binary" text.
    const res = await rawHttp(port, `${lines.join('\r\n')}\r\n\r\n`, bodyBytes);
    const shown = host === null ? headers : [`Host: ${host}`, ...headers];
    checkRaw(
      {
        kind,
        method,
        url: target,
        headers: Object.fromEntries(shown.map((h) => [h.split(':')[0]!, clip(h.slice(h.indexOf(':') + 1), 80)])),
        body: bodyBytes,
      },
      res,
    );
    return res === 'closed' ? undefined : res;
  }

  const utf8AsLatin1 = (s: string) => Buffer.from(s, 'utf8').toString('latin1');

  fuzz('raw non-ASCII Authorization bytes, unnormalised paths and odd methods are answered cleanly', async () => {
    const key = validKey;
    const auths = [
      `Bearer ${utf8AsLatin1('svc_ключ_秘密')}`,
      `Bearer ${utf8AsLatin1('💥'.repeat(100))}`,
      `Bearer ${utf8AsLatin1(`${key}é`)}`,
      `Bearer ${key}\xff`,
      `Bearer ${'x'.repeat(8_000)}`,
      `Bearer ${key}`,
    ];
    for (const info of INFOS) {
      const path = fillPath(info.path, {});
      const body = info.hasBody ? '{"name":"raw"}' : '';
      for (const a of auths) await rawCheck(`${info.id}: raw auth`, info.method, path, [`Authorization: ${a}`], body);
      for (const target of [
        `${path}/../${path.split('/').pop()}`,
        `${V1}/./${path.slice(V1.length + 1)}`,
        `${V1}/../v1/${path.slice(V1.length + 1)}`,
        `${path}/..%2f`,
        `${path}%00`,
        `${path}?limit=${'9'.repeat(2_000)}&limit=1`,
        `${path}/${'a'.repeat(6_000)}`,
        `//${path}`,
        `${path}#frag`,
      ]) {
        await rawCheck(`${info.id}: raw path`, info.method, target, [`Authorization: Bearer ${key}`], body);
      }
      // Duplicate Authorization headers (Node keeps the first).
      await rawCheck(
        `${info.id}: raw duplicate auth`,
        info.method,
        path,
        ['Authorization: Bearer garbage', `Authorization: Bearer ${key}`],
        body,
      );
      for (const method of ['TRACE', 'PROPFIND', 'MKCOL', 'PURGE', 'LINK', 'QUERY']) {
        await rawCheck(`${info.id}: raw method`, method, path, [`Authorization: Bearer ${key}`]);
      }
      // What Node's parser refuses on its own (raw UTF-8 in the request target, control bytes in a
      // header, a head over 16 KiB, methods it does not know, CONNECT): answered with the error body too.
      const refusable: [string, string, string[]][] = [
        ['GET', `${path}?${utf8AsLatin1('ключ=значение')}`, []],
        ['GET', `${path}/${utf8AsLatin1('é💥')}`, []],
        ['GET', path, ['Authorization: Bearer \x7f\x01']],
        ['GET', path, ['Authorization: Bearer \u0000']],
        ['GET', path, [`Authorization: Bearer ${'x'.repeat(20_000)}`]],
        ['GET', path, ['Bad Header: x']],
        ['FOO', path, []],
        ['TRACK', path, []],
        ['CONNECT', path, []],
        ['CONNECT', '127.0.0.1:80', []],
      ];
      for (const [method, target, hs] of refusable) {
        await rawCheck(`${info.id}: raw refusable`, method, target, [`Authorization: Bearer ${key}`, ...hs]);
      }
    }
  });

  fuzz(
    'unparseable URLs and Host headers, no Host at all, and expectations Node does not know are answered with the error body',
    async () => {
      const hosts = [
        '[::1',
        'a b',
        '127.0.0.1:99999',
        '127.0.0.1:-1',
        'user@127.0.0.1',
        'x/y',
        'x?y',
        'x#y',
        '',
        '..',
        utf8AsLatin1('ключ.рф'),
        'x'.repeat(300),
        '[::1]:80',
        'EXAMPLE.com.',
      ];
      for (const info of INFOS) {
        const path = fillPath(info.path, {});
        const body = info.hasBody ? '{"name":"raw"}' : '';
        for (const auth of [[], [`Authorization: Bearer ${validKey}`]]) {
          for (const host of hosts) await rawCheck(`${info.id}: raw host`, info.method, path, auth, body, { host });
          // No Host: HTTP/1.1 requires one; HTTP/1.0 may omit it, but the server has no other to build the URL from.
          await rawCheck(`${info.id}: raw no host`, info.method, path, auth, body, { host: null });
          await rawCheck(`${info.id}: raw no host`, info.method, path, auth, body, { host: null, version: 'HTTP/1.0' });
          for (const target of [
            `http://[::1${path}`,
            `http://127.0.0.1:99999${path}`,
            `http://127.0.0.1${path}`,
            `https://a b${path}`,
            `${path}\\x`,
            `\\${path}`,
            '*',
            path.slice(1),
            `ftp://127.0.0.1${path}`,
          ]) {
            await rawCheck(`${info.id}: raw target`, info.method, target, auth, body);
          }
          for (const expectation of ['something', '100-continue', '']) {
            await rawCheck(`${info.id}: raw expect`, info.method, path, [...auth, `Expect: ${expectation}`], body);
          }
        }
      }
    },
  );

  /** One probe that talks over time, checked like the others, and on how long it held its connection. */
  async function slowCheck(
    kind: string,
    info: RouteInfo,
    head: string,
    talk: (socket: net.Socket, closed: Promise<void>) => unknown,
    heldAtMostMs: number,
  ): Promise<void> {
    const probe: Probe = {
      kind,
      method: info.method,
      url: fillPath(info.path, {}),
      headers: { head: clip(head, 200) },
    };
    const res = await rawTalk(port, talk, heldAtMostMs + 2000).catch((err: unknown) => {
      failures.push(`${String(err)}: ${describeProbe(probe)}`);
      return undefined;
    });
    if (!res) return;
    checkRaw(probe, res);
    if (res !== 'closed' && res.ms > heldAtMostMs)
      failures.push(`held ${Math.round(res.ms)} ms (at most ${heldAtMostMs}): ${describeProbe(probe)}`);
  }

  fuzz(
    'stalled and trickled heads and bodies are answered (408, or earlier) and hold no connection past their bounds',
    async () => {
      // Slack over each bound, generous for a loaded machine: the bounds' defaults are minutes.
      const SLACK = 10_000;
      const probes: Promise<void>[] = [];
      for (const info of INFOS) {
        const path = fillPath(info.path, {});
        const line = `${info.method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n`;
        const fullHead = `${line}Authorization: Bearer ${validKey}\r\n\r\n`;
        probes.push(
          slowCheck(
            `${info.id}: stalled head`,
            info,
            line,
            (s) => s.write(`${line}Authoriz`),
            RAW_LIMITS.headersTimeoutMs + SLACK,
          ),
          slowCheck(
            `${info.id}: trickled head`,
            info,
            line,
            (s, closed) => trickle(s, closed, Buffer.from(fullHead), 1, 25),
            RAW_LIMITS.headersTimeoutMs + SLACK,
          ),
        );
        if (!info.hasBody) continue;
        // A body of each type the route reads, sent the way each probe says; the key is valid, so the
        // body is what the request waits on.
        const multipart = info.id === 'uploadAsset';
        const boundary = 'fuzzboundary';
        const body = Buffer.from(
          multipart
            ? `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\nContent-Type: application/octet-stream\r\n\r\n${'\u0000'.repeat(6000)}\r\n--${boundary}--\r\n`
            : `{"name":"${'n'.repeat(6000)}"}`,
          'latin1',
        );
        const type = multipart ? `multipart/form-data; boundary=${boundary}` : 'application/json';
        const head = (framing: string) =>
          `${line}Authorization: Bearer ${validKey}\r\nContent-Type: ${type}\r\n${framing}\r\n\r\n`;
        const sized = head(`Content-Length: ${body.length}`);
        const chunked = head('Transfer-Encoding: chunked');
        const firstChunk = Buffer.concat([Buffer.from(`${(100).toString(16)}\r\n`), body.subarray(0, 100)]);
        const bodyBound = RAW_LIMITS.bodyStallMs * 1.25 + SLACK;
        probes.push(
          slowCheck(
            `${info.id}: stalled body`,
            info,
            sized,
            (s) => s.write(Buffer.concat([Buffer.from(sized), body.subarray(0, 100)])),
            bodyBound,
          ),
          slowCheck(
            `${info.id}: stalled chunked body`,
            info,
            chunked,
            (s) => s.write(Buffer.concat([Buffer.from(chunked), firstChunk])),
            bodyBound,
          ),
          // 20 bytes/s: under the rate, a stall after one window.
          slowCheck(
            `${info.id}: body trickled under the rate`,
            info,
            sized,
            (s, closed) => (s.write(sized), trickle(s, closed, body, 1, 50)),
            bodyBound,
          ),
          // 250 bytes/s: over the rate, but 6 KiB takes 24 s, far past the whole request's bound.
          slowCheck(
            `${info.id}: body trickled past the request's time`,
            info,
            sized,
            (s, closed) => (s.write(sized), trickle(s, closed, body, 25, 100)),
            RAW_LIMITS.requestTimeoutMs + SLACK,
          ),
        );
      }
      await Promise.all(probes);
    },
  );

  fuzz('a client that hangs up mid-head or mid-body is never a 5xx or an error-level log line', async () => {
    errorLogs = [];
    const probes: Promise<unknown>[] = [];
    for (const info of INFOS) {
      const path = fillPath(info.path, {});
      const line = `${info.method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${validKey}\r\n`;
      const hangUp = (bytes: string, afterMs: number) =>
        rawTalk(port, async (s) => {
          s.write(bytes, 'latin1');
          await new Promise((r) => setTimeout(r, afterMs));
          s.destroy();
        }).catch(() => undefined);
      probes.push(hangUp(line, 50));
      if (!info.hasBody) continue;
      const type = info.id === 'uploadAsset' ? 'multipart/form-data; boundary=fuzzboundary' : 'application/json';
      const start =
        info.id === 'uploadAsset'
          ? '--fuzzboundary\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\n\u0000\u0000'
          : '{"name":"cut';
      for (const afterMs of [0, 100, 300]) {
        probes.push(
          hangUp(`${line}Content-Type: ${type}\r\nContent-Length: 4096\r\n\r\n${start}`, afterMs),
          hangUp(
            `${line}Content-Type: ${type}\r\nTransfer-Encoding: chunked\r\n\r\n${start.length.toString(16)}\r\n${start}\r\n`,
            afterMs,
          ),
        );
      }
    }
    await Promise.all(probes);
    // The app's side of a hang-up ends after the connection, once its read of the body fails: every
    // connection closed on the server's side (each request handed to the app), every answer made.
    const connections = () =>
      new Promise<number>((resolve, reject) =>
        server.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
      );
    await waitFor(
      'the hung-up requests to end',
      async () => ((await connections()) === 0 && answering.size === 0) || undefined,
    );
    for (const line of errorLogs) failures.push(`logged at error level after a hang-up: ${clip(line, 600)}`);
  });

  fuzz(
    'raw bytes that are not text (lone surrogates, invalid UTF-8) and numbers past a double, in every JSON field: 422 naming the field',
    async () => {
      for (const info of INFOS) {
        if (!info.bodySchema) continue;
        const cases = untextCases(info);
        // One fixed, otherwise plain body per route: the first sample of its valid objects.
        const [base] = fc.sample(validObject(info.bodySchema), {
          seed: seedOf(`${info.id}: raw not text`),
          numRuns: 1,
        });
        for (const c of cases) {
          const body = withRawField(base!, c.field, c.raw);
          const kind = `${info.id}: raw not text`;
          const auth = [`Authorization: Bearer ${validKey}`];
          const res = await rawCheck(kind, info.method, fillPath(info.path, {}), auth, body);
          const control = await rawCheck(
            `${kind} (control)`,
            info.method,
            fillPath(info.path, {}),
            auth,
            withRawField(base!, c.field, c.control),
          );
          if (res && control)
            expectRefused(
              { kind: `${kind}: ${c.field} with ${c.what}`, method: info.method, url: info.path, headers: {}, body },
              res,
              control,
              c.field,
              c.message,
            );
        }
      }
    },
  );
});

// ---------------------------------------------------------------------------------------------
// Made-up keys from one address, over real HTTP: every route answers them 401, then a well-formed
// 429 once the address's bound of failed authentications is spent; another address is unaffected
// ---------------------------------------------------------------------------------------------

describe('made-up keys from one address', () => {
  const BOUND = 3;
  let throttled: TestApi;
  let server: ApiServer;
  let port = 0;

  beforeAll(async () => {
    throttled = await testApi({
      env: { AUTH_FAILURE_LIMIT_POINTS: String(BOUND), AUTH_FAILURE_LIMIT_WINDOW_SECONDS: '60' },
    });
    server = await startApiServer(throttled.app.fetch, { port: 0, hostname: '127.0.0.1' });
    port = server.port;
  });

  afterAll(async () => {
    await server?.close({ timeoutMs: 1000 });
    await throttled?.close();
  });

  /** One request over its own connection from `from` (any 127/8 address is this host). */
  function fromAddress(from: string, method: string, url: string, auth: string): Promise<RawAnswer> {
    return new Promise((resolve, reject) => {
      const opened = performance.now();
      const socket = net.connect({ port, host: '127.0.0.1', localAddress: from });
      const chunks: Buffer[] = [];
      socket.on('connect', () =>
        socket.write(
          `${method} ${url} HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
        ),
      );
      socket.on('data', (d: Buffer) => chunks.push(d));
      socket.on('error', reject);
      socket.on('close', () => {
        const all = Buffer.concat(chunks).toString('utf8');
        const split = all.indexOf('\r\n\r\n');
        const [statusLine, ...lines] = all.slice(0, split).split('\r\n');
        const headers = new Map(
          lines.map((l) => [l.slice(0, l.indexOf(':')).trim().toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
        );
        let text = all.slice(split + 4);
        // Chunked: one chunk of JSON, then the last.
        if (headers.get('transfer-encoding') === 'chunked')
          text = text.slice(text.indexOf('\r\n') + 2, text.lastIndexOf('\r\n0\r\n'));
        resolve({
          status: Number(statusLine!.split(' ')[1]),
          headers: { get: (n: string) => headers.get(n.toLowerCase()) ?? null },
          text,
          raw: all.slice(0, split),
          ms: performance.now() - opened,
        });
      });
    });
  }

  fuzz(
    'every route: made-up keys are 401 up to the bound, then 429 without code and with Retry-After; a real key from another address still passes',
    async () => {
      const { apiKey } = await throttled.newTenant({ credits: 10 });
      const madeUp = fc
        .sample(fc.stringMatching(/^[0-9A-Za-z]{16}$/), {
          seed: seedOf('made-up keys'),
          numRuns: BOUND + INFOS.length * 2,
        })
        .map((id) => `Bearer svc_${id}_${'s'.repeat(43)}`);
      let sent = 0;
      for (const info of INFOS) {
        const url = fillPath(info.path, {});
        for (let i = 0; i < 2; i++) {
          const auth = madeUp[sent]!;
          const res = await fromAddress('127.0.0.1', info.method, url, auth);
          const p: Probe = {
            kind: `${info.id}: made-up key flood`,
            method: info.method,
            url,
            headers: { authorization: auth },
            body: '{}',
          };
          try {
            verify(p, res);
          } catch (err) {
            failures.push(err instanceof Error ? err.message : String(err));
          }
          const expected = sent < BOUND ? 401 : 429;
          if (res.status !== expected)
            failures.push(`made-up key ${sent + 1}: expected ${expected}, got ${res.status} for ${describeProbe(p)}`);
          if (res.status === 429 && (res.text.includes('"code"') || !(Number(res.headers.get('retry-after')) > 0)))
            failures.push(`429 with a code or without Retry-After: ${describeProbe(p)}\n${res.text}`);
          sent++;
        }
        const real = await fromAddress('127.0.0.2', info.method, url, `Bearer ${apiKey}`);
        if (real.status === 401 || real.status === 429 || real.status >= 500)
          failures.push(`real key from another address: ${real.status} on ${info.id}`);
      }
    },
  );
});

// ---------------------------------------------------------------------------------------------
// The per-key throttle's 429 is a well-formed error too (against the real Redis)
// ---------------------------------------------------------------------------------------------

describe('rate-limited answers', () => {
  let limited: TestApi;

  beforeAll(async () => {
    limited = await testApi({ redis: true, env: { RATE_LIMIT_POINTS: '2', RATE_LIMIT_WINDOW_SECONDS: '60' } });
  });

  afterAll(async () => {
    await limited?.close();
  });

  it('answers a 429 without code, retryable, with Retry-After, on every route, whatever the body', async () => {
    for (const info of INFOS) {
      const { apiKey } = await limited.newTenant({ credits: 10 });
      const url = fillPath(info.path, {});
      const body = info.hasBody ? '{"name":"limit"}' : undefined;
      const headers = headersOf(`Bearer ${apiKey}`, body ? { 'content-type': 'application/json' } : {});
      for (let i = 0; i < 2; i++) {
        const res = await limited.request(info.method, url, { headers, rawBody: body });
        await res.text();
        expect(res.status, `${info.id} request ${i + 1}`).not.toBe(429);
      }
      const probes: Probe[] = [
        { kind: `${info.id}: 429`, method: info.method, url, headers, body },
        {
          kind: `${info.id}: 429`,
          method: info.method,
          url: `${url}?${'x'.repeat(3_000)}=1`,
          headers: { ...headers, 'content-type': 'text/plain' },
          body: info.hasBody ? '\u0000not json' : undefined,
        },
      ];
      for (const p of probes) {
        const res = await limited.request(p.method, p.url, { headers: p.headers, rawBody: p.body });
        const text = await res.text();
        verify(p, { status: res.status, headers: res.headers, text });
        expect(res.status, describeProbe(p)).toBe(429);
        const b = JSON.parse(text) as Record<string, unknown>;
        expect(b.code, 'a per-key rate limit has no code').toBeUndefined();
        expect(b.queue_size).toBeUndefined();
        expect(b.recommended_retry_ms).toBeUndefined();
        expect(b.retryable).toBe(true);
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      }
    }
  });
});
