import { afterAll, describe, expect, it } from 'vitest';
import { json, testApi } from '../../test/helpers.ts';
import { portraitAsset } from '../routes/avatars/test-support.ts';
import { escapeInvalidUtf8, findJsonProblem, MAX_JSON_DEPTH } from './json.ts';

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
    // Unpaired surrogates, in values and keys; a pair is fine.
    expect(findJsonProblem({ a: '\ud800' })).toEqual({ path: ['a'], problem: 'lone_surrogate' });
    expect(findJsonProblem({ a: ['x\udfffy'] })).toEqual({ path: ['a', 0], problem: 'lone_surrogate' });
    expect(findJsonProblem({ '\udc00': 1 })).toEqual({ path: [], problem: 'lone_surrogate' });
    expect(findJsonProblem({ a: '😀' })).toBeUndefined();
    // Numbers past a double (1e309 parses as Infinity; JSON.stringify would write null).
    expect(findJsonProblem({ a: [1, -Infinity] })).toEqual({ path: ['a', 1], problem: 'number_range' });
    expect(findJsonProblem({ a: Number.MAX_VALUE })).toBeUndefined();
  });

  it('walks hostile nesting without recursion', () => {
    const text = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    expect(findJsonProblem(JSON.parse(text))).toBeUndefined();
    expect(findJsonProblem(JSON.parse(text), { maxDepth: MAX_JSON_DEPTH })?.problem).toBe('depth');
  });
});

describe('escapeInvalidUtf8', () => {
  const bytes = (...parts: (string | number[])[]) =>
    Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p))));

  it('leaves valid UTF-8 alone (undefined), however exotic', () => {
    expect(escapeInvalidUtf8(bytes('{"a":"é😀\\u00e9 \\"q\\\\"}'))).toBeUndefined();
    expect(escapeInvalidUtf8(bytes([0xef, 0xbf, 0xbd]))).toBeUndefined();
  });

  it('writes each invalid byte inside a string as a lone low surrogate escape, so JSON.parse keeps it visible', () => {
    const cases: [Buffer, unknown][] = [
      [bytes('{"n":"a', [0xff], 'b"}'), { n: 'a\udcffb' }],
      // Overlong, surrogate and truncated sequences: byte by byte.
      [bytes('{"n":"', [0xc0, 0xaf], '"}'), { n: '\udcc0\udcaf' }],
      [bytes('{"n":"', [0xed, 0xa0, 0x80], '"}'), { n: '\udced\udca0\udc80' }],
      [bytes('{"n":"x', [0xe2, 0x82], '"}'), { n: 'x\udce2\udc82' }],
      // A valid character next to an invalid byte is kept; an escaped quote does not end the string.
      [bytes('{"n":"\\"é', [0xf5], '"}'), { n: '"é\udcf5' }],
      // In a key too.
      [bytes('{"k', [0x80], '":1}'), { 'k\udc80': 1 }],
    ];
    for (const [input, parsed] of cases) expect(JSON.parse(escapeInvalidUtf8(input)!.toString('utf8'))).toEqual(parsed);
  });

  it('an invalid byte outside a string, or right after a backslash, leaves the body malformed', () => {
    for (const input of [bytes('{"n":', [0xff], '}'), bytes([0xff], '{}'), bytes('{"n":"\\', [0xff], 'x"}')]) {
      expect(() => JSON.parse(escapeInvalidUtf8(input)!.toString('utf8'))).toThrow(SyntaxError);
    }
  });
});

const t = await testApi();
afterAll(() => t.close());

describe('one policy for free-form JSON on every route', () => {
  /** Every free-form object field of the API, with a body around it and the statuses of an accepted body. */
  const FIELDS: {
    route: string;
    method: string;
    url: (avatarId: string) => string;
    field: string;
    body: (v: unknown) => unknown;
    accepted: number;
  }[] = [
    ...['voice', 'llm', 'settings', 'metadata'].flatMap((field) => [
      {
        route: 'createAvatar',
        method: 'POST',
        url: () => '/api/v1/avatars',
        field,
        body: (v: unknown) => ({ displayName: 'Ada', [field]: v }),
        accepted: 201,
      },
      {
        route: 'updateAvatar',
        method: 'PATCH',
        url: (id: string) => `/api/v1/avatars/${id}`,
        field,
        body: (v: unknown) => ({ [field]: v }),
        accepted: 200,
      },
    ]),
    // Accepted by validation, then refused for the loopback address: 422 remote_url_refused.
    {
      route: 'createRemoteAsset',
      method: 'POST',
      url: () => '/api/v1/assets/remote',
      field: 'metadata',
      body: (v: unknown) => ({ kind: 'image', remoteUrl: 'http://127.0.0.1:1/p.png', metadata: v }),
      accepted: 422,
    },
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
      else
        expect(JSON.stringify((ok.body as unknown as Record<string, unknown>)[f.field])).toBe(
          JSON.stringify(nested(MAX_JSON_DEPTH)),
        );

      const refused: [unknown, string][] = [
        [nested(MAX_JSON_DEPTH + 1), `must not nest deeper than ${MAX_JSON_DEPTH} levels`],
        [{ a: [1, 'x\u0000'] }, 'must not contain NUL characters (at a[1])'],
        [{ 'k\u0000': 1 }, 'must not contain NUL characters'],
        [{ a: { b: '\ud800' } }, 'must not contain unpaired UTF-16 surrogates or invalid UTF-8 (at a.b)'],
        [{ '\udfff': 1 }, 'must not contain unpaired UTF-16 surrogates or invalid UTF-8'],
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
      [
        'POST',
        '/api/v1/api-keys',
        { name: 'k', scopes: ['credits:read'], expiresAt: null, environment: 'x\u0000' },
        'environment',
      ],
      ['GET', `/api/v1/usage/sessions?endUserId=${encodeURIComponent('u\u0000')}`, undefined, 'endUserId'],
      ['GET', `/api/v1/avatars/${encodeURIComponent('ava_\u0000')}`, undefined, 'avatarId'],
    ];
    for (const [method, url, body, field] of cases) {
      const res = await t.request(method, url, { key: apiKey, body });
      expect(res.status, url).toBe(422);
      expect(await json(res), url).toMatchObject({
        code: 'validation_error',
        field,
        error: expect.stringContaining('must not contain NUL characters'),
      });
    }
  });

  it('the clip-library declaration, validated past its schema and stored as sent, is held to the same rule, naming the exact field', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const asset = await portraitAsset(t, tenantId);
    const avatar = await t.request('POST', '/api/v1/avatars', {
      key: apiKey,
      body: { displayName: 'Ada', sourceAssetId: asset },
    });
    const url = `/api/v1/avatars/${(await json<{ id: string }>(avatar)).id}/clips`;
    const clips = { look: { source: { motionPrompt: 'look left' } } };
    const cases: [unknown, string, string][] = [
      [
        { expectedRevision: 0, clips, actions: { greet: { description: 'wave \ud800', clips: ['look'] } } },
        'actions.greet.description',
        'must not contain unpaired UTF-16 surrogates or invalid UTF-8',
      ],
      [
        { expectedRevision: 0, clips, extra: nested(MAX_JSON_DEPTH) },
        `extra${'.a'.repeat(MAX_JSON_DEPTH - 1)}`,
        `must not nest deeper than ${MAX_JSON_DEPTH} levels`,
      ],
    ];
    for (const [body, field, why] of cases) {
      const res = await t.request('PUT', url, { key: apiKey, body });
      expect(res.status).toBe(422);
      expect(await json(res)).toMatchObject({
        code: 'validation_error',
        field,
        error: `Invalid field "${field}" in body: ${why}`,
      });
    }
    const ok = await t.request('PUT', url, {
      key: apiKey,
      body: { expectedRevision: 0, clips, actions: { greet: { description: 'wave 😀', clips: ['look'] } } },
    });
    expect(ok.status).toBe(202);
  });
});

describe('one rule for text on every route: lone surrogates and invalid UTF-8 are 422 naming the field, never stored as U+FFFD', () => {
  /** `value` as the raw JSON text of a string: invalid UTF-8 bytes as given, a lone surrogate as its escape. */
  const bodyWith = (fields: Record<string, unknown>, name: string, raw: number[] | string) => {
    const marker = '\u0001MARK\u0001';
    const [before, after] = JSON.stringify({ ...fields, [name]: `a${marker}b` }).split(
      JSON.stringify(marker).slice(1, -1),
    );
    return Buffer.concat([
      Buffer.from(before!, 'utf8'),
      typeof raw === 'string' ? Buffer.from(raw, 'utf8') : Buffer.from(raw),
      Buffer.from(after!, 'utf8'),
    ]);
  };
  const HOSTILE: [string, number[] | string][] = [
    ['a lone high surrogate', '\\ud800'],
    ['a lone low surrogate', '\\udfff'],
    ['an invalid UTF-8 byte', [0xff]],
    ['an overlong UTF-8 sequence', [0xc0, 0xaf]],
    ['a UTF-8 encoded surrogate', [0xed, 0xa0, 0x80]],
  ];

  it('displayName (create and update), personality, a key name', async () => {
    const { apiKey } = await t.newTenant();
    const created = await t.request('POST', '/api/v1/avatars', { key: apiKey, body: { displayName: 'Ada' } });
    const avatarId = (await json<{ id: string }>(created)).id;
    const targets: [string, string, Record<string, unknown>, string][] = [
      ['POST', '/api/v1/avatars', {}, 'displayName'],
      ['PATCH', `/api/v1/avatars/${avatarId}`, {}, 'displayName'],
      ['PATCH', `/api/v1/avatars/${avatarId}`, {}, 'personality'],
      ['POST', '/api/v1/api-keys', {}, 'name'],
    ];
    for (const [method, url, fields, field] of targets) {
      for (const [what, raw] of HOSTILE) {
        const res = await t.request(method, url, {
          key: apiKey,
          rawBody: bodyWith(fields, field, raw),
          headers: { 'content-type': 'application/json' },
        });
        const body = await json(res);
        expect(res.status, `${method} ${url} ${field} with ${what}: ${JSON.stringify(body)}`).toBe(422);
        expect(body, `${field} with ${what}`).toMatchObject({
          code: 'validation_error',
          field,
          error: `Invalid field "${field}" in body: must not contain unpaired UTF-16 surrogates or invalid UTF-8`,
        });
      }
    }
    // Nothing was stored: the avatar keeps its name, and no key but the tenant's own exists.
    const avatar = await json<{ displayName: string; personality: string | null }>(
      await t.request('GET', `/api/v1/avatars/${avatarId}`, { key: apiKey }),
    );
    expect(avatar).toMatchObject({ displayName: 'Ada', personality: null });
  });

  it('a number past a double in free-form JSON is refused naming the field, not stored as null', async () => {
    const { apiKey } = await t.newTenant();
    const res = await t.request('POST', '/api/v1/avatars', {
      key: apiKey,
      rawBody: '{"displayName":"Ada","metadata":{"a":[1,-1e309]}}',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(422);
    expect(await json(res)).toMatchObject({
      code: 'validation_error',
      field: 'metadata',
      error: 'Invalid field "metadata" in body: the number is out of range (at a[1])',
    });
  });

  it('U+FFFD itself, sent as such, is text like any other', async () => {
    const { apiKey } = await t.newTenant();
    const res = await t.request('POST', '/api/v1/api-keys', { key: apiKey, body: { name: 'a\ufffdb' } });
    expect(res.status).toBe(201);
    expect(await json(res)).toMatchObject({ name: 'a\ufffdb' });
  });

  it('invalid UTF-8 outside a string is a malformed body (400), as any other broken JSON', async () => {
    const { apiKey } = await t.newTenant();
    for (const raw of [
      Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0xff, 0x7d]),
      Buffer.from([0xff, 0x7b, 0x7d]),
    ]) {
      const res = await t.request('POST', '/api/v1/api-keys', {
        key: apiKey,
        rawBody: raw,
        headers: { 'content-type': 'application/json' },
      });
      expect(res.status).toBe(400);
      expect(await json(res)).toMatchObject({ code: 'malformed_json' });
    }
  });
});
