import { afterAll, describe, expect, it } from 'vitest';
import { SCOPES, type Scope } from '../core/auth/keys.ts';
import { freshDatabase, json, testApi } from '../test/helpers.ts';
import { ROUTES } from './routes/index.ts';
import { ROUTE_SCOPES, type OperationId } from './scopes.ts';

const db = await freshDatabase();
// Two API "processes" on one database and one Redis: the rate limit must be shared.
const t = await testApi({ redis: true, database: db });
const t2 = await testApi({ redis: true, database: db });
afterAll(async () => {
  await t.close();
  await t2.close();
  await db.drop();
});

/** A concrete URL for a route path: placeholders filled with a plausible id. */
const concrete = (path: string) => path.replace(/\{[^}]+\}/g, 'ava_doesnotexist');

describe('conventions on every /api/v1 response', () => {
  it('carries Cache-Control: no-store and X-Request-ID, success or error; errors repeat the request id', async () => {
    const { apiKey } = await t.newTenant();
    const responses = await Promise.all([
      t.request('GET', '/api/v1/credits/balance', { key: apiKey }),
      t.request('GET', '/api/v1/credits/balance'),
      t.request('GET', '/api/v1/nope', { key: apiKey }),
      t.request('PATCH', '/api/v1/credits/balance', { key: apiKey }),
      t.request('POST', '/api/v1/api-keys', { key: apiKey, body: { nope: 1 } }),
    ]);
    expect(responses.map((r) => r.status)).toEqual([200, 401, 404, 405, 422]);
    for (const res of responses) {
      expect(res.headers.get('cache-control')).toBe('no-store');
      const id = res.headers.get('x-request-id');
      expect(id).toMatch(/^req_/);
      if (res.status >= 400) {
        const body = await json(res);
        expect(body).toMatchObject({
          status: res.status,
          requestId: id,
          retryable: expect.any(Boolean),
          error: expect.any(String),
        });
      }
    }
  });

  it('an unknown route is a 404 error body; a known path with the wrong method is 405 with Allow', async () => {
    const notFound = await json(await t.request('GET', '/api/v1/does/not/exist'));
    expect(notFound).toMatchObject({ code: 'not_found', status: 404 });
    const wrong = await t.request('PUT', '/api/v1/api-keys');
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
    expect(await json(wrong)).toMatchObject({ code: 'method_not_allowed' });
  });
});

describe('OpenAPI document', () => {
  it('is OpenAPI 3.1, version 1.0.0, and describes every route from the schemas that validate', async () => {
    const res = await t.request('GET', '/openapi.json');
    expect(res.status).toBe(200);
    const doc = await json<{
      openapi: string;
      info: { version: string };
      paths: Record<string, Record<string, { operationId: string }>>;
      components: { schemas: Record<string, { additionalProperties?: boolean }> };
    }>(res);
    expect(doc.openapi).toMatch(/^3\.1\./);
    expect(doc.info.version).toBe('1.0.0');
    for (const { route } of ROUTES) {
      const path = route.path.replace(/:(\w+)/g, '{$1}');
      expect(doc.paths[path]?.[route.method]?.operationId, `${route.method} ${path}`).toBe(route.operationId);
    }
    // Strict schemas show as closed objects, so generated clients know unknown fields are refused.
    expect(doc.components.schemas.CreateApiKeyRequest?.additionalProperties).toBe(false);
  });
});

describe('scopes', () => {
  it('every route is in the scope table, and each needs exactly its scope', async () => {
    for (const { route } of ROUTES) {
      const needed = ROUTE_SCOPES[route.operationId as OperationId] as Scope | null | undefined;
      expect(needed, route.operationId).toBeDefined();
      const body = route.method === 'get' ? undefined : {};
      if (needed === null) {
        // Any valid key: one with a single scope, unrelated, passes.
        const any = await t.newTenant({ scopes: ['usage:read'] });
        const res = await t.request(route.method.toUpperCase(), concrete(route.path), { key: any.apiKey, body });
        expect(res.status, `${route.operationId} with any key`).not.toBe(403);
        continue;
      }
      const others = SCOPES.filter((s) => s !== needed && s !== '*');
      const without = await t.newTenant({ scopes: others });
      const res = await t.request(route.method.toUpperCase(), concrete(route.path), { key: without.apiKey, body });
      expect(res.status, `${route.operationId} without ${needed}`).toBe(403);
      expect((await json(res)).requiredScope).toBe(needed);
      const withIt = await t.newTenant({ scopes: [needed!] });
      const ok = await t.request(route.method.toUpperCase(), concrete(route.path), { key: withIt.apiKey, body });
      expect(ok.status, `${route.operationId} with ${needed}`).not.toBe(403);
    }
  });
});

describe('body caps', () => {
  it('refuses a body over the cap while reading it, even without Content-Length', async () => {
    const { apiKey } = await t.newTenant();
    let sent = 0;
    const chunk = new TextEncoder().encode(`"${'x'.repeat(1022)}",`);
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('{"name":['));
      },
      pull(c) {
        // 1 MiB at most: the server must stop long before.
        if (sent > 1024 * 1024) return c.close();
        sent += chunk.length;
        c.enqueue(chunk);
      },
    });
    const res = await t.request('POST', '/api/v1/api-keys', {
      key: apiKey,
      rawBody: stream,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(413);
    expect(await json(res)).toMatchObject({ code: 'payload_too_large', maxBytes: 16 * 1024 });
  });
});

describe('rate limit', () => {
  it('allows exactly 120 requests per 60 s per key across two API processes, then 429 without code and with Retry-After', async () => {
    const { apiKey } = await t.newTenant();
    const other = await t.newTenant();
    const statuses: number[] = [];
    const limited: Response[] = [];
    for (let batch = 0; batch < 13; batch++) {
      const rs = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          ((batch + i) % 2 ? t : t2).request('GET', '/api/v1/credits/balance', { key: apiKey }),
        ),
      );
      for (const r of rs) {
        statuses.push(r.status);
        if (r.status === 429) limited.push(r);
      }
    }
    expect(statuses.filter((s) => s === 200).length).toBe(120);
    expect(limited.length).toBe(10);
    const body = await json(limited[0]!);
    expect(body).toMatchObject({ status: 429, retryable: true });
    expect(body).not.toHaveProperty('code');
    expect(body).not.toHaveProperty('queue_size');
    expect(body).not.toHaveProperty('recommended_retry_ms');
    expect(Number(limited[0]!.headers.get('retry-after'))).toBeGreaterThan(0);
    // Per key, not per workspace or process: another key is unaffected.
    expect((await t2.request('GET', '/api/v1/credits/balance', { key: other.apiKey })).status).toBe(200);
  });
});
