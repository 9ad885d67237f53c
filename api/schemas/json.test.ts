import { afterAll, describe, expect, it } from 'vitest';
import { json, testApi } from '../../test/helpers.ts';
import { portraitAsset } from '../routes/avatars/test-support.ts';
import { findJsonProblem, MAX_JSON_DEPTH } from './json.ts';

/** `levels` levels of nesting: nested(1) is {"a":1}. */
function nested(levels: number, leaf: unknown = 1): Record<string, unknown> {
  let v: unknown = leaf;
  for (let i = 0; i < levels; i++) v = { a: v };
  return v as Record<string, unknown>;
}

describe('findJsonProblem', () => {
  it('counts levels of objects and arrays, and reports the first problem with its path', () => {
    expect(findJsonProblem(nested(3), { maxDepth: 3 })).toBeUndefined();
    expect(findJsonProblem(nested(4), { maxDepth: 3 })).toEqual({ path: ['a', 'a', 'a'], problem: 'depth' });
    expect(findJsonProblem({ a: [[1]] }, { maxDepth: 3 })).toBeUndefined();
    expect(findJsonProblem({ a: [[[]]] }, { maxDepth: 3 })).toEqual({ path: ['a', 0, 0], problem: 'depth' });
    expect(findJsonProblem({ a: ['x', 'y\u0000'] })).toEqual({ path: ['a', 1], problem: 'nul' });
    expect(findJsonProblem({ a: { 'k\u0000': 1 } })).toEqual({ path: ['a'], problem: 'nul' });
    // Unpaired surrogates only when asked (typed text fields store them as U+FFFD); a pair is fine.
    expect(findJsonProblem({ a: '\ud800' })).toBeUndefined();
    expect(findJsonProblem({ a: '\ud800' }, { loneSurrogates: true })).toEqual({ path: ['a'], problem: 'lone_surrogate' });
    expect(findJsonProblem({ '\udc00': 1 }, { loneSurrogates: true })).toEqual({ path: [], problem: 'lone_surrogate' });
    expect(findJsonProblem({ a: '😀' }, { loneSurrogates: true })).toBeUndefined();
  });

  it('walks hostile nesting without recursion', () => {
    const text = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    expect(findJsonProblem(JSON.parse(text))).toBeUndefined();
    expect(findJsonProblem(JSON.parse(text), { maxDepth: MAX_JSON_DEPTH })?.problem).toBe('depth');
  });
});

const t = await testApi();
afterAll(() => t.close());

describe('one policy for free-form JSON on every route', () => {
  /** Every free-form object field of the API, with a body around it and the statuses of an accepted body. */
  const FIELDS: { route: string; method: string; url: (avatarId: string) => string; field: string; body: (v: unknown) => unknown; accepted: number }[] = [
    ...['voice', 'llm', 'settings', 'metadata'].flatMap((field) => [
      { route: 'createAvatar', method: 'POST', url: () => '/api/v1/avatars', field, body: (v: unknown) => ({ displayName: 'Ada', [field]: v }), accepted: 201 },
      { route: 'updateAvatar', method: 'PATCH', url: (id: string) => `/api/v1/avatars/${id}`, field, body: (v: unknown) => ({ [field]: v }), accepted: 200 },
    ]),
    // Accepted by validation, then refused for the loopback address: 422 remote_url_refused.
    { route: 'createRemoteAsset', method: 'POST', url: () => '/api/v1/assets/remote', field: 'metadata', body: (v: unknown) => ({ kind: 'image', remoteUrl: 'http://127.0.0.1:1/p.png', metadata: v }), accepted: 422 },
  ];

  for (const f of FIELDS) {
    it(`${f.route} ${f.field}: ${MAX_JSON_DEPTH} levels are stored; deeper, NUL or unpaired surrogates (keys or values) are 422 naming the field`, async () => {
      const { apiKey } = await t.newTenant();
      const avatar = await t.request('POST', '/api/v1/avatars', { key: apiKey, body: { displayName: 'Ada' } });
      const avatarId = (await json<{ id: string }>(avatar)).id;
      const send = async (v: unknown) => {
        const res = await t.request(f.method, f.url(avatarId), { key: apiKey, body: f.body(v) });
        return { status: res.status, body: await json<{ code: string; field: string | null; error: string }>(res) };
      };
      const ok = await send(nested(MAX_JSON_DEPTH));
      expect(ok.status, JSON.stringify(ok.body)).toBe(f.accepted);
      if (f.accepted === 422) expect(ok.body.code).toBe('remote_url_refused');
      else expect(JSON.stringify((ok.body as unknown as Record<string, unknown>)[f.field])).toBe(JSON.stringify(nested(MAX_JSON_DEPTH)));

      const refused: [unknown, string][] = [
        [nested(MAX_JSON_DEPTH + 1), `must not nest deeper than ${MAX_JSON_DEPTH} levels`],
        [{ a: [1, 'x\u0000'] }, 'must not contain NUL characters (at a[1])'],
        [{ 'k\u0000': 1 }, 'must not contain NUL characters'],
        [{ a: { b: '\ud800' } }, 'must not contain unpaired UTF-16 surrogates (at a.b)'],
        [{ '\udfff': 1 }, 'must not contain unpaired UTF-16 surrogates'],
      ];
      for (const [v, why] of refused) {
        const r = await send(v);
        expect(r.status, JSON.stringify(r.body)).toBe(422);
        expect(r.body).toMatchObject({ code: 'validation_error', field: f.field });
        expect(r.body.error.startsWith(`Invalid field "${f.field}" in body: ${why}`), r.body.error).toBe(true);
      }
    });
  }

  it('a NUL anywhere else in validated input is 422 naming the exact field (body, query, path)', async () => {
    const { apiKey } = await t.newTenant();
    const cases: [string, string, unknown, string][] = [
      ['POST', '/api/v1/api-keys', { name: 'a\u0000b' }, 'name'],
      ['POST', '/api/v1/api-keys', { name: 'k', scopes: ['credits:read'], expiresAt: null, environment: 'x\u0000' }, 'environment'],
      ['GET', `/api/v1/usage/sessions?endUserId=${encodeURIComponent('u\u0000')}`, undefined, 'endUserId'],
      ['GET', `/api/v1/avatars/${encodeURIComponent('ava_\u0000')}`, undefined, 'avatarId'],
    ];
    for (const [method, url, body, field] of cases) {
      const res = await t.request(method, url, { key: apiKey, body });
      expect(res.status, url).toBe(422);
      expect(await json(res), url).toMatchObject({ code: 'validation_error', field, error: expect.stringContaining('must not contain NUL characters') });
    }
  });

  it('the clip-library declaration, validated past its schema and stored as sent, is held to the same rule, naming the exact field', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const asset = await portraitAsset(t, tenantId);
    const avatar = await t.request('POST', '/api/v1/avatars', { key: apiKey, body: { displayName: 'Ada', sourceAssetId: asset } });
    const url = `/api/v1/avatars/${(await json<{ id: string }>(avatar)).id}/clips`;
    const clips = { look: { source: { motionPrompt: 'look left' } } };
    const cases: [unknown, string, string][] = [
      [{ expectedRevision: 0, clips, actions: { greet: { description: 'wave \ud800', clips: ['look'] } } }, 'actions.greet.description', 'must not contain unpaired UTF-16 surrogates'],
      [{ expectedRevision: 0, clips, extra: nested(MAX_JSON_DEPTH) }, `extra${'.a'.repeat(MAX_JSON_DEPTH - 1)}`, `must not nest deeper than ${MAX_JSON_DEPTH} levels`],
    ];
    for (const [body, field, why] of cases) {
      const res = await t.request('PUT', url, { key: apiKey, body });
      expect(res.status).toBe(422);
      expect(await json(res)).toMatchObject({ code: 'validation_error', field, error: `Invalid field "${field}" in body: ${why}` });
    }
    const ok = await t.request('PUT', url, { key: apiKey, body: { expectedRevision: 0, clips, actions: { greet: { description: 'wave 😀', clips: ['look'] } } } });
    expect(ok.status).toBe(202);
  });
});
