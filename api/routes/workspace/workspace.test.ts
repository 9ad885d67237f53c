import { afterAll, describe, expect, it } from 'vitest';
import { json, testApi } from '../../../test/helpers.ts';

const t = await testApi();
afterAll(() => t.close());
const URL = '/api/v1/workspace';

const patch = (key: string, body: unknown) => t.request('PATCH', URL, { key, body });
const origins = async (tenantId: string) => (await t.services.tenants.get(tenantId))!.allowedOrigins;

describe('GET /workspace', () => {
  it('happy: any key of the workspace reads it; a new workspace allows any origin ([])', async () => {
    const { apiKey, tenantId } = await t.newTenant({ scopes: ['usage:read'] });
    const res = await t.request('GET', URL, { key: apiKey });
    expect(res.status).toBe(200);
    expect(await json(res)).toMatchObject({ id: tenantId, status: 'active', allowedOrigins: [] });
  });

  it('error: 401 without a key', async () => {
    expect((await t.request('GET', URL)).status).toBe(401);
  });
});

describe('PATCH /workspace', () => {
  it('happy: sets the allowed origins (replacing the list), reads them back; [] removes the limit', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const list = ['https://app.example.com', 'http://localhost:5173', 'http://127.0.0.1:8080', 'https://[::1]:8443'];
    const res = await patch(apiKey, { allowedOrigins: list });
    expect(res.status).toBe(200);
    expect(await json(res)).toMatchObject({ id: tenantId, allowedOrigins: list });
    expect(await json(await t.request('GET', URL, { key: apiKey }))).toMatchObject({ allowedOrigins: list });
    expect((await patch(apiKey, { allowedOrigins: ['https://b.example.com'] })).status).toBe(200);
    expect(await origins(tenantId)).toEqual(['https://b.example.com']);
    expect((await patch(apiKey, { allowedOrigins: [] })).status).toBe(200);
    expect(await origins(tenantId)).toEqual([]);
  });

  it.each([
    ['a path', 'https://app.example.com/page'],
    ['a trailing slash', 'https://app.example.com/'],
    ['a query', 'https://app.example.com?x=1'],
    ['a wildcard', 'https://*.example.com'],
    ['a bare wildcard', '*'],
    ['uppercase', 'https://App.Example.com'],
    ['another scheme', 'ftp://app.example.com'],
    ['a javascript: URL', 'javascript:alert(1)'],
    ['no scheme', 'app.example.com'],
    ['the default port spelled out', 'https://app.example.com:443'],
    ['credentials', 'https://user@app.example.com'],
    ['empty', ''],
    ['"null"', 'null'],
  ])('error: an entry with %s is 422 naming it, nothing written', async (_what, bad) => {
    const { apiKey, tenantId } = await t.newTenant();
    await patch(apiKey, { allowedOrigins: ['https://kept.example.com'] });
    const res = await patch(apiKey, { allowedOrigins: ['https://a.example.com', 'https://b.example.com', bad] });
    expect(res.status).toBe(422);
    expect(await json(res)).toMatchObject({ code: 'validation_error', field: 'allowedOrigins[2]' });
    expect(await origins(tenantId)).toEqual(['https://kept.example.com']);
  });

  it('error: a duplicate is 422 naming its second place; more than 20 is 422; nothing written', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const dup = await patch(apiKey, {
      allowedOrigins: ['https://a.example.com', 'https://b.example.com', 'https://a.example.com'],
    });
    expect(dup.status).toBe(422);
    expect(await json(dup)).toMatchObject({ field: 'allowedOrigins[2]', error: expect.stringContaining('twice') });
    const many = Array.from({ length: 21 }, (_, i) => `https://s${i}.example.com`);
    const tooMany = await patch(apiKey, { allowedOrigins: many });
    expect(tooMany.status).toBe(422);
    expect(await json(tooMany)).toMatchObject({ field: 'allowedOrigins' });
    expect((await patch(apiKey, { allowedOrigins: many.slice(0, 20) })).status).toBe(200);
    expect(await origins(tenantId)).toHaveLength(20);
    await patch(apiKey, { allowedOrigins: [] });
    expect(await origins(tenantId)).toEqual([]);
  });

  it('error: a body without allowedOrigins, with another field or of another type is 422 naming the field', async () => {
    const { apiKey } = await t.newTenant();
    expect(await json(await patch(apiKey, {}))).toMatchObject({ status: 422, field: 'allowedOrigins' });
    expect(await json(await patch(apiKey, { allowedOrigins: [], name: 'x' }))).toMatchObject({
      status: 422,
      field: 'name',
    });
    expect(await json(await patch(apiKey, { allowedOrigins: 'https://a.example.com' }))).toMatchObject({
      status: 422,
      field: 'allowedOrigins',
    });
    expect(await json(await patch(apiKey, { allowedOrigins: [7] }))).toMatchObject({
      status: 422,
      field: 'allowedOrigins[0]',
    });
  });

  it('security: a key without api_keys:write is 403 naming the scope, nothing written', async () => {
    const { apiKey, tenantId } = await t.newTenant({ scopes: ['realtime:write', 'avatars:write', 'credits:read'] });
    const res = await patch(apiKey, { allowedOrigins: ['https://evil.example.com'] });
    expect(res.status).toBe(403);
    expect(await json(res)).toMatchObject({ code: 'forbidden', requiredScope: 'api_keys:write' });
    expect(await origins(tenantId)).toEqual([]);
  });

  it("security: a workspace's key changes only its own workspace", async () => {
    const a = await t.newTenant();
    const b = await t.newTenant();
    expect((await patch(a.apiKey, { allowedOrigins: ['https://a.example.com'] })).status).toBe(200);
    expect(await origins(b.tenantId)).toEqual([]);
  });
});
