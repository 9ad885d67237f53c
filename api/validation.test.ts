import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json, testApi } from '../test/helpers.ts';
import { portraitAsset } from './routes/avatars/test-support.ts';
import { ROUTES } from './routes/index.ts';
import { fieldPath } from './schemas/json.ts';

/**
 * Validation messages of every JSON route, probed from the OpenAPI document: each documented field
 * (nested objects, record values and array items included) sent with the wrong type, each required
 * field left out, and bodies that are not JSON objects. The answer must say what is wrong: the field
 * and the expected type, "Missing required field" only for a field that is absent.
 */

const t = await testApi();
afterAll(() => t.close());

interface Schema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
}

interface Operation {
  operationId: string;
  requestBody?: { content: Record<string, { schema: Schema }> };
}

let doc: { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Schema> } };
beforeAll(async () => {
  doc = await json(await t.request('GET', '/openapi.json'));
});

function resolve(s: Schema): Schema {
  return s.$ref ? resolve(doc.components.schemas[s.$ref.replace('#/components/schemas/', '')]!) : s;
}

/** The JSON types a schema admits, or undefined when it admits anything. */
function admitted(s: Schema): Set<string> | undefined {
  s = resolve(s);
  if (s.anyOf) {
    const all = new Set<string>();
    for (const alt of s.anyOf) {
      const a = admitted(alt);
      if (!a) return undefined;
      a.forEach((x) => all.add(x));
    }
    return all;
  }
  const values = s.enum ?? ('const' in s ? [s.const] : undefined);
  if (values) return new Set(values.map(jsonType));
  if (s.type === undefined) return undefined;
  const types = new Set(Array.isArray(s.type) ? s.type : [s.type]);
  if (types.has('integer')) types.add('number');
  return types;
}

function jsonType(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'number' ? 'number' : typeof v;
}

const WRONG: [unknown, string][] = [
  [5, 'a number'],
  ['x', 'a string'],
  [true, 'a boolean'],
  [[], 'an array'],
  [{}, 'an object'],
];

interface Probe {
  body: unknown;
  field: string | null;
  /** Expected message, for routes whose messages come from the route validator. */
  message: RegExp;
}

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function withValue(base: unknown, path: (string | number)[], value: unknown, remove = false): unknown {
  const copy = structuredClone(base) as Record<string | number, unknown>;
  let at = copy;
  for (const p of path.slice(0, -1)) at = at[p] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (remove) delete at[last];
  else at[last] = value;
  return copy;
}

/** Wrong-type and missing-field probes for every field the base body holds, at any depth. */
function fieldProbes(base: unknown, schema: Schema): Probe[] {
  const probes: Probe[] = [];
  const walk = (value: unknown, s: Schema, path: (string | number)[]) => {
    s = resolve(s);
    if (path.length > 0) {
      const types = admitted(s);
      const wrong = types && WRONG.find(([v]) => !types.has(jsonType(v)));
      if (wrong) {
        const field = fieldPath(path);
        probes.push({
          body: withValue(base, path, wrong[0]),
          field,
          message: new RegExp(`^Invalid field "${esc(field)}" in body: expected .+, got ${esc(wrong[1])}$`),
        });
      }
    }
    if (Array.isArray(value) && s.items && value.length > 0) walk(value[0], s.items, [...path, 0]);
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) {
        const prop =
          s.properties?.[k] ?? (typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined);
        if (prop) walk(v, prop, [...path, k]);
      }
      for (const k of s.required ?? []) {
        if (!(k in value)) continue;
        const field = fieldPath([...path, k]);
        probes.push({
          body: withValue(base, [...path, k], undefined, true),
          field,
          message: new RegExp(`^Missing required field "${esc(field)}" in body$`),
        });
      }
    }
  };
  walk(base, schema, []);
  return probes;
}

const ROOTS: [unknown, string][] = [
  [[], 'an array'],
  [null, 'null'],
  ['str', 'a string'],
  [5, 'a number'],
];

/** A body the route's schema accepts, with every optional field present so that each is probed. */
const future = new Date(Date.now() + 86_400_000).toISOString();
const VALID_BODIES: Record<string, (ctx: { avatarId: string }) => { url?: string; body: unknown }> = {
  createApiKey: () => ({
    body: { name: 'k', scopes: ['credits:read'], spendLimitCreditMicros: 5, expiresAt: future, environment: 'live' },
  }),
  createAvatar: () => ({
    body: {
      displayName: 'Ada',
      sourceKind: 'image',
      sourceAssetId: 'ast_x',
      motionPrompt: 'nod',
      voice: { a: 1 },
      defaultVoiceId: 'v',
      llm: { m: 'x' },
      settings: { s: [1] },
      metadata: { k: 'v' },
    },
  }),
  updateAvatar: () => ({
    body: {
      displayName: 'Ada',
      defaultVoiceId: 'v',
      voice: {},
      llm: {},
      settings: {},
      metadata: {},
      motionPrompt: 'nod',
      personality: 'p',
      background: 'b',
      artDirection: 'a',
      replyStyle: 'r',
      portraitUrl: 'https://example.com/p.png',
      sourceAssetId: 'ast_x',
      anchorTimeMs: 0,
      sourceReview: { reason: 'looks right' },
    },
  }),
  redirectAvatarLoop: () => ({ body: { motionPrompt: 'nod slowly' } }),
  putClipLibrary: ({ avatarId }) => ({
    url: `/api/v1/avatars/${avatarId}/clips`,
    body: {
      expectedRevision: 0,
      clips: {
        look: { source: { motionPrompt: 'look left', durationSeconds: 5 } },
        wave: { source: { assetId: 'ast_x' } },
      },
      idle: { clips: ['look'], weights: { source: 2, look: 1 } },
      on: { userSpeechStarted: { clips: ['look'] } },
      actions: { greet: { description: 'Wave hello', clips: ['wave'] } },
    },
  }),
  reviewClip: () => ({
    body: {
      clipId: 'wave',
      uploadAssetId: 'ast_x',
      expectedRevision: 0,
      expectedAnchorVersion: 1,
      reason: 'a person checked it',
    },
  }),
  createRemoteAsset: () => ({
    body: { kind: 'image', remoteUrl: 'https://example.com/p.png', originalFilename: 'p.png', metadata: { k: [1] } },
  }),
  renderLipsync: ({ avatarId }) => ({ body: { audioUrl: 'https://example.com/a.wav', avatarId } }),
  createScene: () => ({
    body: {
      source: { url: 'https://example.com/clip.mp4', md5: '9e107d9d372bb6826bd81d3542a419d6', bytes: 1000 },
      continuation: 'loop',
      profile: 'scene-v0',
    },
  }),
  mintLiveSession: ({ avatarId }) => ({
    body: {
      avatar_id: avatarId,
      capacity_pool: 'primary',
      client_metadata: { user_id: 'u-1' },
      scene: { video_cache_id: 'vc_x' },
      queue_ticket_id: 'qtk_x',
      max_duration_seconds: 60,
      record: false,
      room: { name: 'their-room', agent_identity: 'their-agent' },
    },
  }),
  updateWorkspace: () => ({ body: { allowedOrigins: ['https://app.example.com'] } }),
  releaseLiveSession: () => ({ body: { session_id: 'ses_x', reason: 'manual', capacity_pool: 'primary' } }),
  prepareRealtime: ({ avatarId }) => ({ body: { avatar_id: avatarId } }),
  runTurn: ({ avatarId }) => ({
    body: { avatar_id: avatarId, mode: 'repeat', text: 'Hello.', conversation_id: 'c-1' },
  }),
  planVideoCache: ({ avatarId }) => ({
    body: { avatar_id: avatarId, video_cache: { fps: 25, width: 256, height: 256, quality: 80 } },
  }),
};

/** Routes whose body is validated by the clip declaration rules (422 clip_declaration_rejected), past the route's own JSON-object check. */
const DECLARATION_ROUTES = new Set(['putClipLibrary']);

const jsonRoutes = ROUTES.filter(
  ({ route }) => route.request?.body && 'application/json' in (route.request.body.content ?? {}),
);

describe('validation messages of every JSON route', () => {
  it('every JSON route has a valid body in the table', () => {
    expect(jsonRoutes.map(({ route }) => route.operationId).sort()).toEqual(Object.keys(VALID_BODIES).sort());
  });

  for (const { route } of jsonRoutes) {
    it(`${route.operationId}: wrong types, missing fields and non-object bodies are 422 saying what is wrong`, async () => {
      const { apiKey, tenantId } = await t.newTenant();
      const asset = await portraitAsset(t, tenantId);
      const created = await t.request('POST', '/api/v1/avatars', {
        key: apiKey,
        body: { displayName: 'Ada', sourceKind: 'image', sourceAssetId: asset },
      });
      expect(created.status).toBe(201);
      const avatarId = (await json<{ id: string }>(created)).id;
      const { url = route.path.replace('{avatarId}', avatarId), body } = VALID_BODIES[route.operationId as string]!({
        avatarId,
      });
      const op = doc.paths[route.path]![route.method]!;
      const schema = op.requestBody!.content['application/json']!.schema;

      const probes: Probe[] = ROOTS.map(([root, got]) => ({
        body: root,
        field: null,
        message: new RegExp(`^The request body must be a JSON object, got ${esc(got)}$`),
      }));
      const fields = fieldProbes(body, schema);
      expect(fields.length, 'probes derived from the document').toBeGreaterThan(0);
      for (const p of [...probes, ...fields]) {
        const res = await t.request(route.method.toUpperCase(), url, {
          key: apiKey,
          rawBody: JSON.stringify(p.body),
          headers: { 'content-type': 'application/json' },
        });
        const answer = await json<{ error: string; field: string | null; code: string }>(res);
        const what = `${route.operationId} ${JSON.stringify(p.body)}: ${JSON.stringify(answer)}`;
        expect(res.status, what).toBe(422);
        expect(answer.field, what).toBe(p.field);
        if (DECLARATION_ROUTES.has(route.operationId as string) && p.field !== null) {
          expect(answer.code, what).toBe('clip_declaration_rejected');
        } else {
          expect(answer.code, what).toBe('validation_error');
          expect(answer.error, what).toMatch(p.message);
        }
      }
    });
  }

  it('query values: a present value of the wrong type is named with what was received', async () => {
    const { apiKey } = await t.newTenant();
    const res = await t.request('GET', '/api/v1/usage/sessions?limit=abc', { key: apiKey });
    expect(res.status).toBe(422);
    expect(await json(res)).toMatchObject({
      field: 'limit',
      error: 'Invalid field "limit" in query: expected a number, got "abc"',
    });
  });

  it('a number too large for a double (1e309 parses as Infinity) is out of range, naming the field, in a body or a query', async () => {
    const { apiKey } = await t.newTenant();
    for (const n of ['1e309', '-1e309', `1${'0'.repeat(400)}`]) {
      const res = await t.request('POST', '/api/v1/api-keys', {
        key: apiKey,
        rawBody: `{"name":"k","spendLimitCreditMicros":${n}}`,
        headers: { 'content-type': 'application/json' },
      });
      expect(res.status).toBe(422);
      expect(await json(res), n).toMatchObject({
        code: 'validation_error',
        field: 'spendLimitCreditMicros',
        error: 'Invalid field "spendLimitCreditMicros" in body: the number is out of range',
      });
    }
    const res = await t.request('GET', '/api/v1/usage/sessions?limit=1e400', { key: apiKey });
    expect(res.status).toBe(422);
    expect(await json(res)).toMatchObject({
      field: 'limit',
      error: 'Invalid field "limit" in query: the number is out of range',
    });
  });

  it('the examples of the report: wrong types are not "missing"', async () => {
    const { apiKey } = await t.newTenant();
    const cases: [unknown, string, string][] = [
      [{ name: 5 }, 'name', 'Invalid field "name" in body: expected a string, got a number'],
      [{ name: ['a'] }, 'name', 'Invalid field "name" in body: expected a string, got an array'],
      [
        { name: 'k', spendLimitCreditMicros: 'abc' },
        'spendLimitCreditMicros',
        'Invalid field "spendLimitCreditMicros" in body: expected a number, got a string',
      ],
      [
        { name: 'k', spendLimitCreditMicros: 1.5 },
        'spendLimitCreditMicros',
        'Invalid field "spendLimitCreditMicros" in body: expected an integer, got 1.5',
      ],
      [
        { name: 'k', scopes: ['credits:read', 7] },
        'scopes[1]',
        'Invalid field "scopes[1]" in body: expected one of "*", "api_keys:write", "credits:read", "avatars:read", "avatars:write", "realtime:write", "usage:read", "usage:write", "recordings:read", got a number',
      ],
      [{}, 'name', 'Missing required field "name" in body'],
    ];
    for (const [body, field, error] of cases) {
      const res = await t.request('POST', '/api/v1/api-keys', { key: apiKey, body });
      expect(res.status).toBe(422);
      expect(await json(res), JSON.stringify(body)).toMatchObject({ code: 'validation_error', field, error });
    }
    for (const [body, got] of ROOTS) {
      const res = await t.request('POST', '/api/v1/api-keys', {
        key: apiKey,
        rawBody: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
      });
      expect(res.status).toBe(422);
      expect(await json(res)).toMatchObject({
        code: 'validation_error',
        field: null,
        error: `The request body must be a JSON object, got ${got}`,
      });
    }
  });
});
