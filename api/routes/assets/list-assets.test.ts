import { afterAll, describe, expect, it } from 'vitest';
import { newId } from '../../../core/platform/ids.ts';
import { json, testApi } from '../../../test/helpers.ts';
import { ASSETS, failedImport, uploadPng, type WireAsset } from './test-support.ts';

const t = await testApi();
afterAll(() => t.close());

interface Page {
  data: WireAsset[];
  nextCursor: string | null;
  code?: string;
  field?: string;
}

async function list(key: string, query = '') {
  const res = await t.request('GET', `${ASSETS}${query}`, { key });
  return { res, body: await json<Page>(res) };
}

/** Every id, page by page, following nextCursor from `query`. */
async function walk(key: string, query: string): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let pages = 0;
  let cursor: string | null = null;
  do {
    const sep = query ? '&' : '?';
    const { res, body } = await list(key, cursor ? `${query}${sep}cursor=${encodeURIComponent(cursor)}` : query);
    expect(res.status).toBe(200);
    ids.push(...body.data.map((a) => a.id));
    cursor = body.nextCursor;
    pages++;
  } while (cursor && pages < 50);
  return { ids, pages };
}

/** `n` rows created oldest first; their ids newest first (the list's order). */
/**
 * `n` pending assets, in the list's order: newest first, and by id (in the database's collation) among
 * rows of the same millisecond.
 */
async function pendingRows(tenantId: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await t.services.assets.createPending({ tenantId, kind: 'image' })).id);
  const ordered = await t.services.sql<
    { id: string }[]
  >`select id from assets where id = any(${ids}) order by created_at desc, id desc`;
  return ordered.map((r) => r.id);
}

describe('GET /assets', () => {
  it('happy: lists the workspace assets, most recent first, ready ones with a signed URL, pending ones without', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    expect((await list(apiKey)).body).toEqual({ data: [], nextCursor: null });
    const a = await uploadPng(t, apiKey);
    const pending = await t.services.assets.createPending({
      tenantId,
      kind: 'video',
      sourceUrl: 'https://example.com/x.mp4',
    });
    const b = await uploadPng(t, apiKey);
    const { res, body } = await list(apiKey);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(body.data.map((x) => x.id)).toEqual([b.id, pending.id, a.id]);
    expect(body.nextCursor).toBeNull();
    expect(body.data[1]).toMatchObject({ status: 'pending_upload', publicUrl: null });
    expect(body.data[0]!.publicUrl).toMatch(/\/media\/.*\?exp=\d+&sig=/);
  });

  it('happy: every asset is reachable: 100 per page by default, then nextCursor pages on to the oldest', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const all = await pendingRows(tenantId, 105);
    const first = await list(apiKey);
    expect(first.body.data.map((a) => a.id)).toEqual(all.slice(0, 100));
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const rest = await list(apiKey, `?cursor=${first.body.nextCursor}`);
    expect(rest.body.data.map((a) => a.id)).toEqual(all.slice(100));
    expect(rest.body.nextCursor).toBeNull();
    const small = await walk(apiKey, '?limit=7');
    expect(small.ids).toEqual(all);
    expect(small.pages).toBe(15);
  });

  it('happy: rows created within one millisecond (and the same instant) are neither skipped nor repeated across pages', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    // Microsecond parts as now() would give them (sent as text: a Date parameter would carry only
    // milliseconds), and exact ties broken by id.
    const times = [
      '2026-03-01T10:00:00.123456Z',
      '2026-03-01T10:00:00.123999Z',
      '2026-03-01T10:00:00.123001Z',
      '2026-03-01T10:00:00.123001Z',
      '2026-03-01T10:00:00.122999Z',
    ];
    for (const at of times) {
      await t.services.sql`
        insert into assets (id, tenant_id, kind, status, created_at) values (${newId('asset')}, ${tenantId}, 'image', 'pending_upload', ${at}::text::timestamptz)`;
    }
    const { ids } = await walk(apiKey, '?limit=1');
    expect(ids.length).toBe(times.length);
    expect(new Set(ids).size).toBe(times.length);
    expect(ids).toEqual((await list(apiKey)).body.data.map((a) => a.id));
  });

  it('happy: failed remote imports stay listed with their error, never push a ready asset out of reach, and status=ready leaves them out', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const ready = await uploadPng(t, apiKey);
    for (let i = 0; i < 101; i++) await failedImport(t, tenantId);
    const first = await list(apiKey);
    expect(first.body.data.length).toBe(100);
    expect(first.body.data[0]).toMatchObject({ status: 'failed', error: 'remote_url_refused', publicUrl: null });
    expect((await walk(apiKey, '')).ids.at(-1)).toBe(ready.id);
    const onlyReady = await list(apiKey, '?status=ready');
    expect(onlyReady.body.data.map((a) => a.id)).toEqual([ready.id]);
    expect(onlyReady.body.data[0]!.publicUrl).toMatch(/\?exp=\d+&sig=/);
    expect(onlyReady.body.nextCursor).toBeNull();
  });

  it('happy: kind and status narrow the list, and page within it', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const image = await uploadPng(t, apiKey);
    const video = await t.services.assets.createPending({ tenantId, kind: 'video' });
    const audio = await t.services.assets.createPending({ tenantId, kind: 'audio' });
    expect((await list(apiKey, '?kind=image')).body.data.map((a) => a.id)).toEqual([image.id]);
    expect((await list(apiKey, '?kind=video&status=pending_upload')).body.data.map((a) => a.id)).toEqual([video.id]);
    expect((await list(apiKey, '?kind=video&status=ready')).body.data).toEqual([]);
    // Paged one by one, the same two as in one page, in its order (two rows of the same
    // millisecond are in the database's order, not their creation's).
    const paged = (await walk(apiKey, '?status=pending_upload&limit=1')).ids;
    expect([...paged].sort()).toEqual([audio.id, video.id].sort());
    expect(paged).toEqual((await list(apiKey, '?status=pending_upload')).body.data.map((a) => a.id));
  });

  it('error: 401 without a key; 422 naming the query parameter for an unknown one, a limit out of 1..100, a cursor this API did not issue, an unknown status or kind', async () => {
    const { apiKey } = await t.newTenant();
    expect((await t.request('GET', ASSETS)).status).toBe(401);
    const cases: [string, string][] = [
      ['?nope=1', 'nope'],
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?limit=abc', 'limit'],
      ['?limit=2.5', 'limit'],
      ['?cursor=not-a-cursor', 'cursor'],
      [`?cursor=${Buffer.from('["yesterday","ast_1"]').toString('base64url')}`, 'cursor'],
      ['?status=deleted', 'status'],
      ['?kind=document', 'kind'],
    ];
    for (const [query, field] of cases) {
      const { res, body } = await list(apiKey, query);
      expect(res.status, query).toBe(422);
      expect(body, query).toMatchObject({ code: 'validation_error', field });
    }
  });

  it("security: a tenant never lists another's assets, not even through the other's cursor; the store answers undefined for another tenant's id", async () => {
    const one = await t.newTenant();
    const two = await t.newTenant();
    const mine = await uploadPng(t, one.apiKey);
    const theirs = await uploadPng(t, two.apiKey);
    await pendingRows(two.tenantId, 3);
    expect((await list(one.apiKey)).body.data.map((x) => x.id)).toEqual([mine.id]);
    expect((await list(two.apiKey)).body.data.map((x) => x.id)).toContain(theirs.id);
    const theirCursor = (await list(two.apiKey, '?limit=1')).body.nextCursor!;
    expect((await list(one.apiKey, `?cursor=${theirCursor}`)).body.data.map((x) => x.id)).toEqual([mine.id]);
    expect(await t.services.assets.get(one.tenantId, theirs.id)).toBeUndefined();
    expect((await t.services.assets.get(two.tenantId, theirs.id))?.id).toBe(theirs.id);
    await expect(t.services.assets.openStream(one.tenantId, theirs.id)).rejects.toThrow();
    expect((await t.services.assets.readBytes(two.tenantId, theirs.id)).length).toBeGreaterThan(0);
  });
});
