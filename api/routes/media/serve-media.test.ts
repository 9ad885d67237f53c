import { afterAll, describe, expect, it } from 'vitest';
import { loadSigningSecret, MediaSigner } from '../../../core/platform/storage/signing.ts';
import { json, testApi, withTamperedSignature } from '../../../test/helpers.ts';

const t = await testApi();
afterAll(() => t.close());

const data = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 256));
const KEY = 'tenants/ten_x/assets/ast_media1';
await t.services.storage.put(KEY, data, { contentType: 'video/mp4' });

/** Path and query of a signed URL, for app.request. */
async function signedPath(key = KEY, ttl = 600): Promise<string> {
  const u = new URL(await t.services.storage.signedUrl(key, ttl));
  return u.pathname + u.search;
}

describe('GET /media/<key> (local signed media)', () => {
  it('happy: serves the whole object with its type, length, Accept-Ranges and an ETag, without a bearer key', async () => {
    const res = await t.request('GET', await signedPath());
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('video/mp4');
    expect(res.headers.get('content-length')).toBe('1000');
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(res.headers.get('etag')).toMatch(/^"[0-9a-f]{64}"$/);
    expect(res.headers.get('cache-control')).toMatch(/^private, max-age=\d+$/);
    expect(Buffer.from(await res.arrayBuffer()).equals(data)).toBe(true);
  });

  it('happy: honours single byte ranges with 206 and Content-Range; HEAD answers headers only', async () => {
    const p = await signedPath();
    const cases: [string, number, number][] = [
      ['bytes=0-99', 0, 99],
      ['bytes=990-', 990, 999],
      ['bytes=-10', 990, 999],
      ['bytes=500-5000', 500, 999],
    ];
    for (const [range, start, end] of cases) {
      const res = await t.request('GET', p, { headers: { range } });
      expect(res.status, range).toBe(206);
      expect(res.headers.get('content-range')).toBe(`bytes ${start}-${end}/1000`);
      expect(res.headers.get('content-length')).toBe(String(end - start + 1));
      expect(Buffer.from(await res.arrayBuffer()).equals(data.subarray(start, end + 1))).toBe(true);
    }
    const head = await t.request('HEAD', p);
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('1000');
    expect(head.headers.get('accept-ranges')).toBe('bytes');
    expect((await head.arrayBuffer()).byteLength).toBe(0);
    const headRange = await t.request('HEAD', p, { headers: { range: 'bytes=0-9' } });
    expect(headRange.status).toBe(206);
    expect(headRange.headers.get('content-range')).toBe('bytes 0-9/1000');
  });

  it('error: an unsatisfiable or malformed range is 416 with Content-Range bytes */size and the JSON error body', async () => {
    const p = await signedPath();
    for (const range of ['bytes=1000-', 'bytes=5-2', 'bytes=abc', 'bytes=-0']) {
      const res = await t.request('GET', p, { headers: { range } });
      expect(res.status, range).toBe(416);
      expect(res.headers.get('content-range')).toBe('bytes */1000');
      expect(await json(res)).toMatchObject({ status: 416, code: 'range_not_satisfiable' });
    }
  });

  it('security: a missing, tampered, foreign-key or expired signature is 403; a valid one for a missing object 404', async () => {
    const p = await signedPath();
    const u = new URL(p, 'http://x');
    const sig = u.searchParams.get('sig')!;
    const exp = u.searchParams.get('exp')!;
    const other = new URL(await signedPath('tenants/ten_x/assets/ast_other'), 'http://x');
    const signer = new MediaSigner(loadSigningSecret(t.services.config.dataDir));
    const past = Math.floor(Date.now() / 1000) - 1;
    const refused = [
      u.pathname,
      `${u.pathname}?exp=${exp}`,
      withTamperedSignature(p),
      `${u.pathname}?exp=${Number(exp) + 1}&sig=${sig}`,
      `${u.pathname}?exp=${past}&sig=${signer.sign(KEY, past)}`,
      `${u.pathname}${other.search}`,
      `/media/..%2f..%2fmedia-signing.secret${u.search}`,
      `/media/%zz${u.search}`,
    ];
    for (const path of refused) {
      const res = await t.request('GET', path);
      expect(res.status, path).toBe(403);
      const body = await json(res);
      expect(body).toMatchObject({ status: 403, code: 'forbidden' });
      expect(res.headers.get('cache-control')).toBe('no-store');
    }
    const missing = await t.request('GET', other.pathname + other.search);
    expect(missing.status).toBe(404);
    expect((await json(missing)).code).toBe('not_found');
  });
});
