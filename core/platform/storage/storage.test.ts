import { createHash } from 'node:crypto';
import { mkdtempSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startS3Server, type RunningServer } from '../../../test/deps.ts';
import { LocalStorage } from './local.ts';
import { parseRange } from './range.ts';
import { S3Storage } from './s3.ts';
import { presignGetUrl } from './sigv4.ts';
import { loadSigningSecret, MediaSigner, SIGNING_SECRET_FILE } from './signing.ts';
import { ObjectNotFoundError, SizeLimitError, type ObjectStorage } from './types.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const bytes = (n: number, seed = 7) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) % 251));

/** A stream of `total` bytes in 64 KiB chunks, optionally failing after `failAfter` bytes. */
function chunked(data: Buffer, failAfter?: number): Readable {
  let off = 0;
  return new Readable({
    read() {
      if (failAfter !== undefined && off >= failAfter) return this.destroy(new Error('source broke'));
      if (off >= data.length) return this.push(null);
      this.push(data.subarray(off, off + 65536));
      off += 65536;
    },
  });
}

// ---- S3-compatible server for the contract: moto (PyPI `moto[server]`), a real S3 wire protocol on loopback ----
let moto: RunningServer | undefined;
let motoUrl = '';

beforeAll(async () => {
  moto = await startS3Server();
  motoUrl = moto.url;
}, 30_000);

afterAll(() => moto?.stop());

interface Flavour {
  name: string;
  enabled: boolean;
  make(): Promise<ObjectStorage>;
  /** GETs a signed URL and returns status and bytes. */
  fetchSigned(storage: ObjectStorage, url: string): Promise<{ status: number; body: Buffer }>;
}

const flavours: Flavour[] = [
  {
    name: 'local (DATA_DIR/media)',
    enabled: true,
    make: async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'storage-test-'));
      return new LocalStorage(path.join(dir, 'media'), new MediaSigner(loadSigningSecret(dir)), 'http://media.test');
    },
    // The app's /media route is tested in api/routes/media; here: the signature verifies, then read.
    fetchSigned: async (storage, url) => {
      const u = new URL(url);
      const key = decodeURIComponent(u.pathname.replace(/^\/media\//, ''));
      const local = storage as LocalStorage;
      if (!local.verify(key, u.searchParams.get('exp'), u.searchParams.get('sig')))
        return { status: 403, body: Buffer.alloc(0) };
      return { status: 200, body: await buffer(await local.get(key)) };
    },
  },
  {
    name: 'S3 (moto server)',
    enabled: true,
    make: async () => {
      const bucket = `b${Date.now().toString(36)}${Math.floor(Math.random() * 1e6)}`;
      const s = new S3Storage({
        bucket,
        endpoint: motoUrl,
        region: 'us-east-1',
        accessKeyId: 'test',
        secretAccessKey: 'test',
      });
      await s.client.send(new CreateBucketCommand({ Bucket: bucket }));
      return s;
    },
    fetchSigned: async (_s, url) => {
      const res = await fetch(url);
      return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
    },
  },
];

describe.each(flavours)('object storage contract: $name', (flavour) => {
  const maybe = flavour.enabled ? it : it.skip;

  maybe('put streams and hashes; stat, get, ranged get and delete agree', async () => {
    const s = await flavour.make();
    const data = bytes(300_000);
    const put = await s.put('tenants/t1/assets/a1', chunked(data), { contentType: 'image/png' });
    expect(put).toEqual({ size: data.length, sha256: sha(data) });
    expect(await s.stat('tenants/t1/assets/a1')).toMatchObject({ size: data.length, contentType: 'image/png' });
    expect((await buffer(await s.get('tenants/t1/assets/a1'))).equals(data)).toBe(true);
    expect(
      (await buffer(await s.get('tenants/t1/assets/a1', { start: 10, end: 19 }))).equals(data.subarray(10, 20)),
    ).toBe(true);
    expect(
      (await buffer(await s.get('tenants/t1/assets/a1', { start: data.length - 5, end: data.length - 1 }))).equals(
        data.subarray(-5),
      ),
    ).toBe(true);
    // A buffer body, overwriting.
    const small = Buffer.from('hello');
    expect(await s.put('tenants/t1/assets/a1', small, { contentType: 'text/plain' })).toEqual({
      size: 5,
      sha256: sha(small),
    });
    expect((await buffer(await s.get('tenants/t1/assets/a1'))).toString()).toBe('hello');
    await s.delete('tenants/t1/assets/a1');
    expect(await s.stat('tenants/t1/assets/a1')).toBeUndefined();
    await expect(s.get('tenants/t1/assets/a1')).rejects.toBeInstanceOf(ObjectNotFoundError);
    await s.delete('tenants/t1/assets/a1'); // deleting nothing is fine
  });

  maybe('a body over maxBytes fails with SizeLimitError while streaming, and nothing is stored', async () => {
    const s = await flavour.make();
    let pulled = 0;
    const endless = new Readable({
      read() {
        pulled += 65536;
        this.push(pulled > 100_000_000 ? null : Buffer.alloc(65536, 1));
      },
    });
    await expect(s.put('k/over', endless, { contentType: 'video/mp4', maxBytes: 1_000_000 })).rejects.toBeInstanceOf(
      SizeLimitError,
    );
    expect(pulled).toBeLessThan(30_000_000);
    expect(await s.stat('k/over')).toBeUndefined();
    // Exactly at the cap is fine.
    const exact = bytes(1_000_000);
    expect((await s.put('k/exact', chunked(exact), { contentType: 'video/mp4', maxBytes: 1_000_000 })).size).toBe(
      1_000_000,
    );
  });

  maybe('a source that fails midway leaves nothing stored', async () => {
    const s = await flavour.make();
    await expect(s.put('k/broken', chunked(bytes(500_000), 200_000), { contentType: 'audio/wav' })).rejects.toThrow(
      /source broke/,
    );
    expect(await s.stat('k/broken')).toBeUndefined();
  });

  maybe('refuses keys that could escape the store', async () => {
    const s = await flavour.make();
    for (const key of ['', '../x', 'a/../../x', '/abs', 'a//b', 'a/./b', 'a\\b', 'a b', 'x.meta.json', 'é']) {
      await expect(s.put(key, Buffer.from('x'), { contentType: 'text/plain' }), key).rejects.toThrow(
        /Invalid storage key/,
      );
    }
  });

  maybe('signedUrl gives an expiring URL that reads the object, valid at most an hour', async () => {
    const s = await flavour.make();
    const data = bytes(1000);
    await s.put('tenants/t2/assets/x', data, { contentType: 'image/jpeg' });
    const url = await s.signedUrl('tenants/t2/assets/x', 600);
    const got = await flavour.fetchSigned(s, url);
    expect(got.status).toBe(200);
    expect(got.body.equals(data)).toBe(true);
    const long = new URL(await s.signedUrl('tenants/t2/assets/x', 86_400));
    const expiry = Number(
      long.searchParams.get('exp') ?? Number(long.searchParams.get('X-Amz-Expires')) + Date.now() / 1000,
    );
    expect(expiry - Date.now() / 1000).toBeLessThanOrEqual(3601);
  });

  maybe(
    "resolveSignedUrl knows the store's own URLs: the key, and whether the signature holds or has expired",
    async () => {
      const s = await flavour.make();
      const url = await s.signedUrl('tenants/t3/assets/ast_1', 600);
      expect(await s.resolveSignedUrl(url)).toEqual({ key: 'tenants/t3/assets/ast_1', signature: 'valid' });
      // Tampered with: another key under the same signature, a changed signature.
      const other = url.replace('ast_1', 'ast_2');
      expect(await s.resolveSignedUrl(other)).toEqual({ key: 'tenants/t3/assets/ast_2', signature: 'invalid' });
      const u = new URL(url);
      const sigParam = u.searchParams.has('sig') ? 'sig' : 'X-Amz-Signature';
      const sig = u.searchParams.get(sigParam)!;
      u.searchParams.set(sigParam, `${sig.slice(0, -1)}${sig.endsWith('A') || sig.endsWith('a') ? 'b' : 'a'}`);
      expect((await s.resolveSignedUrl(u.toString()))?.signature).toBe('invalid');
      // Expired: signed (genuinely) with a time in the past.
      const expired = await expiredUrl(s, 'tenants/t3/assets/ast_1');
      expect(await s.resolveSignedUrl(expired)).toEqual({ key: 'tenants/t3/assets/ast_1', signature: 'expired' });
      // Anything else is not ours.
      for (const foreign of [
        'https://example.com/media/tenants/t3/assets/ast_1?exp=1&sig=x',
        'not a url',
        'ftp://media.test/media/a',
      ]) {
        expect(await s.resolveSignedUrl(foreign), foreign).toBeUndefined();
      }
    },
  );
});

/** A genuine signed URL of `key` whose lifetime ended a minute ago. */
async function expiredUrl(s: ObjectStorage, key: string): Promise<string> {
  if (s instanceof LocalStorage) {
    const exp = Math.floor(Date.now() / 1000) - 60;
    const signer = (s as unknown as { signer: MediaSigner }).signer;
    return `http://media.test/media/${key}?exp=${exp}&sig=${signer.sign(key, exp)}`;
  }
  const fresh = new URL(await s.signedUrl(key, 60));
  return presignGetUrl({
    protocol: fresh.protocol as 'http:',
    host: fresh.host,
    path: decodeURIComponent(fresh.pathname),
    region: 'us-east-1',
    accessKeyId: 'test',
    secretAccessKey: 'test',
    expiresSeconds: 60,
    now: new Date(Date.now() - 120_000),
  });
}

describe('local storage specifics', () => {
  it('makes the signing secret once, mode 0600, outside the media folder; MEDIA_SIGNING_SECRET overrides it', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'secret-test-'));
    const a = loadSigningSecret(dir);
    const b = loadSigningSecret(dir);
    expect(a).toBe(b);
    expect(a.length).toBeGreaterThanOrEqual(32);
    expect(statSync(path.join(dir, SIGNING_SECRET_FILE)).mode & 0o777).toBe(0o600);
    expect(loadSigningSecret(dir, 'configured-secret-of-enough-length')).toBe('configured-secret-of-enough-length');
  });

  it('signatures bind key and expiry, expire, and refuse lifetimes past an hour', () => {
    const signer = new MediaSigner('s'.repeat(32));
    const now = Date.now();
    const exp = Math.floor(now / 1000) + 60;
    const sig = signer.sign('a/b', exp);
    expect(signer.verify('a/b', String(exp), sig, now)).toBe(true);
    expect(signer.verify('a/c', String(exp), sig, now)).toBe(false);
    expect(signer.verify('a/b', String(exp + 1), sig, now)).toBe(false);
    expect(signer.verify('a/b', String(exp), sig, now + 61_000)).toBe(false);
    expect(signer.verify('a/b', String(exp), `${sig.slice(0, -1)}${sig.endsWith('A') ? 'B' : 'A'}`, now)).toBe(false);
    expect(new MediaSigner('t'.repeat(32)).verify('a/b', String(exp), sig, now)).toBe(false);
    const far = Math.floor(now / 1000) + 86_400;
    expect(signer.verify('a/b', String(far), signer.sign('a/b', far), now)).toBe(false);
    for (const bad of [undefined, '', 'x', '1e9', '-1']) expect(signer.verify('a/b', bad, sig, now)).toBe(false);
  });

  it('parses single byte ranges; malformed or unsatisfiable ones are 416, several ranges the full object', () => {
    expect(parseRange(undefined, 100)).toEqual({ kind: 'full' });
    expect(parseRange('bytes=0-9', 100)).toEqual({ kind: 'partial', range: { start: 0, end: 9 } });
    expect(parseRange('bytes=90-', 100)).toEqual({ kind: 'partial', range: { start: 90, end: 99 } });
    expect(parseRange('bytes=-10', 100)).toEqual({ kind: 'partial', range: { start: 90, end: 99 } });
    expect(parseRange('bytes=-1000', 100)).toEqual({ kind: 'partial', range: { start: 0, end: 99 } });
    expect(parseRange('bytes=50-5000', 100)).toEqual({ kind: 'partial', range: { start: 50, end: 99 } });
    for (const bad of ['bytes=100-', 'bytes=9-3', 'bytes=-0', 'bytes=abc', 'bytes=-', 'bytes=1-2-3'])
      expect(parseRange(bad, 100), bad).toEqual({ kind: 'unsatisfiable' });
    expect(parseRange('bytes=0-1,5-6', 100)).toEqual({ kind: 'full' });
    expect(parseRange('items=0-1', 100)).toEqual({ kind: 'full' });
  });
});

describe('S3 presigned URLs (SigV4)', () => {
  it('matches the worked example of the S3 documentation', () => {
    const url = presignGetUrl({
      protocol: 'https:',
      host: 'examplebucket.s3.amazonaws.com',
      path: '/test.txt',
      region: 'us-east-1',
      accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
      secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
      expiresSeconds: 86_400,
      now: new Date('2013-05-24T00:00:00Z'),
    });
    expect(url).toBe(
      'https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request' +
        '&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404',
    );
  });
});
