import { afterAll, describe, expect, it } from 'vitest';
import { json, testApi } from '../../../test/helpers.ts';
import { multipart, png } from './test-media.ts';

const t = await testApi();
afterAll(() => t.close());
const ROUTE = '/api/v1/assets';

interface Asset {
  id: string;
  tenantId: string;
  status: string;
  publicUrl: string | null;
}

async function uploadPng(key: string): Promise<Asset> {
  const { body, contentType } = multipart([{ name: 'file', value: await png(), filename: 'a.png' }]);
  const res = await t.request('POST', ROUTE, { key, rawBody: body, headers: { 'content-type': contentType } });
  expect(res.status).toBe(201);
  return json<Asset>(res);
}

async function list(key: string) {
  const res = await t.request('GET', ROUTE, { key });
  return { res, body: await json<{ data: Asset[] }>(res) };
}

describe('GET /assets', () => {
  it('happy: lists the workspace assets, most recent first, ready ones with a signed URL, pending ones without', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    expect((await list(apiKey)).body).toEqual({ data: [] });
    const a = await uploadPng(apiKey);
    const pending = await t.services.assets.createPending({ tenantId, kind: 'video', sourceUrl: 'https://example.com/x.mp4' });
    const b = await uploadPng(apiKey);
    const { res, body } = await list(apiKey);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(body.data.map((x) => x.id)).toEqual([b.id, pending.id, a.id]);
    expect(body.data[1]).toMatchObject({ status: 'pending_upload', publicUrl: null });
    expect(body.data[0]!.publicUrl).toMatch(/\/media\/.*\?exp=\d+&sig=/);
  });

  it('happy: is capped at 100 entries', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    for (let i = 0; i < 105; i++) await t.services.assets.createPending({ tenantId, kind: 'image' });
    expect((await list(apiKey)).body.data.length).toBe(100);
  });

  it('error: 401 without a key, 422 for an unknown query parameter', async () => {
    const { apiKey } = await t.newTenant();
    expect((await t.request('GET', ROUTE)).status).toBe(401);
    const res = await t.request('GET', `${ROUTE}?limit=5`, { key: apiKey });
    expect(res.status).toBe(422);
    expect((await json(res)).field).toBe('limit');
  });

  it("security: a tenant never lists another's assets, and the store answers undefined for another tenant's id", async () => {
    const one = await t.newTenant();
    const two = await t.newTenant();
    const mine = await uploadPng(one.apiKey);
    const theirs = await uploadPng(two.apiKey);
    expect((await list(one.apiKey)).body.data.map((x) => x.id)).toEqual([mine.id]);
    expect((await list(two.apiKey)).body.data.map((x) => x.id)).toEqual([theirs.id]);
    expect(await t.services.assets.get(one.tenantId, theirs.id)).toBeUndefined();
    expect((await t.services.assets.get(two.tenantId, theirs.id))?.id).toBe(theirs.id);
    await expect(t.services.assets.openStream(one.tenantId, theirs.id)).rejects.toThrow();
    expect((await t.services.assets.readBytes(two.tenantId, theirs.id)).length).toBeGreaterThan(0);
  });
});
