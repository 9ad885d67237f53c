import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Meter, toReadable } from './meter.ts';
import type { MediaSigner } from './signing.ts';
import {
  assertValidKey,
  clampTtl,
  ObjectNotFoundError,
  type ByteRange,
  type ObjectStat,
  type ObjectStorage,
  type PutOptions,
  type PutResult,
  type SignedUrlMatch,
} from './types.ts';

/** Public path prefix the app serves local media at (outside /api/v1: the signature is the auth). */
export const MEDIA_PATH = '/media';

interface Meta {
  contentType: string;
  size: number;
  sha256: string;
}

/**
 * Objects as files under `root` (DATA_DIR/media), each with a `<file>.meta.json` beside it. Writes go
 * to a temporary file renamed into place, so a reader never sees a partial object.
 */
export class LocalStorage implements ObjectStorage {
  readonly kind = 'local' as const;

  constructor(
    readonly root: string,
    private readonly signer: MediaSigner,
    /** Origin of signed URLs, e.g. https://api.example.com. */
    private readonly publicBaseUrl: string,
  ) {}

  private file(key: string): string {
    assertValidKey(key);
    const file = path.resolve(this.root, key);
    if (!file.startsWith(path.resolve(this.root) + path.sep))
      throw new Error(`Invalid storage key: ${JSON.stringify(key)}`);
    return file;
  }

  async put(key: string, body: Readable | Uint8Array, opts: PutOptions): Promise<PutResult> {
    const file = this.file(key);
    await fs.mkdir(path.dirname(file), { recursive: true });
    const tmp = `${file}.tmp-${randomBytes(6).toString('hex')}`;
    const meter = new Meter(opts.maxBytes);
    try {
      await pipeline(toReadable(body), meter, createWriteStream(tmp, { mode: 0o600 }));
      const meta: Meta = { contentType: opts.contentType, size: meter.size, sha256: meter.sha256() };
      const metaTmp = `${tmp}.meta`;
      await fs.writeFile(metaTmp, JSON.stringify(meta), { mode: 0o600 });
      await fs.rename(metaTmp, `${file}.meta.json`);
      await fs.rename(tmp, file);
      return { size: meta.size, sha256: meta.sha256 };
    } catch (err) {
      await Promise.all([fs.rm(tmp, { force: true }), fs.rm(`${tmp}.meta`, { force: true })]);
      throw err;
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const file = this.file(key);
    let handle;
    try {
      handle = await fs.open(file, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new ObjectNotFoundError(key);
      throw err;
    }
    // The stream owns the handle and closes it when done or destroyed.
    return handle.createReadStream(range ? { start: range.start, end: range.end } : {});
  }

  async stat(key: string): Promise<ObjectStat | undefined> {
    const file = this.file(key);
    try {
      const [st, metaText] = await Promise.all([fs.stat(file), fs.readFile(`${file}.meta.json`, 'utf8')]);
      const meta = JSON.parse(metaText) as Meta;
      return { size: st.size, contentType: meta.contentType, sha256: meta.sha256 };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    const file = this.file(key);
    await fs.rm(file, { force: true });
    await fs.rm(`${file}.meta.json`, { force: true });
  }

  async signedUrl(key: string, ttlSeconds: number): Promise<string> {
    assertValidKey(key);
    const exp = Math.floor(Date.now() / 1000) + clampTtl(ttlSeconds);
    const sig = this.signer.sign(key, exp);
    const encoded = key.split('/').map(encodeURIComponent).join('/');
    return `${this.publicBaseUrl}${MEDIA_PATH}/${encoded}?exp=${exp}&sig=${sig}`;
  }

  async resolveSignedUrl(url: string): Promise<SignedUrlMatch | undefined> {
    let u: URL;
    let base: URL;
    try {
      u = new URL(url);
      base = new URL(`${this.publicBaseUrl}${MEDIA_PATH}/`);
    } catch {
      return undefined;
    }
    if (u.origin !== base.origin || !u.pathname.startsWith(base.pathname)) return undefined;
    let key: string;
    try {
      key = decodeURIComponent(u.pathname.slice(base.pathname.length));
      assertValidKey(key);
    } catch {
      return { key: '', signature: 'invalid' };
    }
    return {
      key,
      signature: this.signer.check(key, u.searchParams.get('exp') ?? undefined, u.searchParams.get('sig') ?? undefined),
    };
  }

  /** Checks a signed URL's parameters for `key` (the media route's only authentication). */
  verify(key: string, exp: unknown, sig: unknown): boolean {
    try {
      assertValidKey(key);
    } catch {
      return false;
    }
    return this.signer.verify(key, exp, sig);
  }
}
