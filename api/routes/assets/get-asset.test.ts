import { afterAll, describe, expect, it } from 'vitest';
import { json, testApi } from '../../../test/helpers.ts';
import { png } from './test-media.ts';
import { ASSETS, failedImport, uploadPng, type WireAsset } from './test-support.ts';

const t = await testApi();
afterAll(() => t.close());

async function get(key: string | undefined, id: string) {
  const res = await t.request('GET', `${ASSETS}/${id}`, key ? { key } : {});
  return { res, body: await json<WireAsset & { code?: string; error?: string }>(res) };
}

describe('GET /assets/{assetId}', () => {
  it('happy: the asset as listed, with a fresh signed publicUrl that serves its bytes', async () => {
    const { apiKey } = await t.newTenant();
    const uploaded = await uploadPng(t, apiKey);
    const { res, body } = await get(apiKey, uploaded.id);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect({ ...body, publicUrl: null }).toEqual({ ...uploaded, publicUrl: null });
    const u = new URL(body.publicUrl!);
    expect(Number(u.searchParams.get('exp'))).toBeGreaterThan(Date.now() / 1000 + 3500);
    const media = await t.request('GET', u.pathname + u.search);
    expect(media.status).toBe(200);
    expect(Buffer.from(await media.arrayBuffer()).equals(await png())).toBe(true);
  });

  it('happy: an asset older than the newest 100 is still readable (and its URL renewable) by id', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const old = await uploadPng(t, apiKey);
    for (let i = 0; i < 100; i++) await t.services.assets.createPending({ tenantId, kind: 'image' });
    const { res, body } = await get(apiKey, old.id);
    expect(res.status).toBe(200);
    expect(body).toMatchObject({ id: old.id, status: 'ready', publicUrl: expect.stringMatching(/\?exp=\d+&sig=/) });
  });

  it('happy: a failed remote import is readable by the assetId its error named, with why', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const id = await failedImport(t, tenantId, 'remote_timeout');
    const { res, body } = await get(apiKey, id);
    expect(res.status).toBe(200);
    expect(body).toMatchObject({ id, status: 'failed', error: 'remote_timeout', publicUrl: null, contentType: null });
  });

  it('error: 401 without a key; 404 for an unknown id and for one that cannot be an asset id', async () => {
    const { apiKey } = await t.newTenant();
    const mine = await uploadPng(t, apiKey);
    expect((await get(undefined, mine.id)).res.status).toBe(401);
    for (const id of [
      'ast_doesnotexist',
      'ava_0123456789ABCDEFGHij',
      'x',
      `ast_${'a'.repeat(100)}`,
      'ast_%27%20or%201=1',
    ]) {
      const { res, body } = await get(apiKey, id);
      expect(res.status, id).toBe(404);
      expect(body.code, id).toBe('not_found');
    }
  });

  it("security: another tenant's asset is 404, the same answer as an unknown id, and its URL is not given out", async () => {
    const owner = await t.newTenant();
    const other = await t.newTenant();
    const theirs = await uploadPng(t, owner.apiKey);
    const { res, body } = await get(other.apiKey, theirs.id);
    expect(res.status).toBe(404);
    expect(body).toMatchObject({ code: 'not_found' });
    expect(JSON.stringify(body)).not.toContain('/media/');
    expect((await get(owner.apiKey, theirs.id)).res.status).toBe(200);
  });
});
