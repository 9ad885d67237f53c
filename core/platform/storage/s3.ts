import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { timingSafeEqual } from 'node:crypto';
import type { Readable } from 'node:stream';
import { Meter, toReadable } from './meter.ts';
import { presignGetUrl } from './sigv4.ts';
import {
  assertValidKey,
  clampTtl,
  MAX_SIGNED_URL_TTL_SECONDS,
  ObjectNotFoundError,
  type ByteRange,
  type ObjectStat,
  type ObjectStorage,
  type PutOptions,
  type PutResult,
  type SignedUrlMatch,
} from './types.ts';

export interface S3StorageOptions {
  bucket: string;
  region?: string;
  /** An S3-compatible endpoint (MinIO, R2, ...); path-style addressing is used with one. */
  endpoint?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** Key prefix inside the bucket, e.g. "media/". */
  prefix?: string;
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}

/**
 * An S3-compatible bucket. Uploads stream through lib-storage's Upload (multipart past 8 MiB, at
 * most two parts in memory), hashing as they go; reads are ranged GETs; links are presigned GETs.
 */
export class S3Storage implements ObjectStorage {
  readonly kind = 's3' as const;
  readonly client: S3Client;
  private readonly region: string;

  constructor(private readonly opts: S3StorageOptions) {
    this.region = opts.region ?? 'us-east-1';
    this.client = new S3Client({
      region: this.region,
      endpoint: opts.endpoint,
      forcePathStyle: Boolean(opts.endpoint),
      credentials:
        opts.accessKeyId && opts.secretAccessKey
          ? { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey }
          : undefined,
    });
  }

  private objectKey(key: string): string {
    assertValidKey(key);
    return `${this.opts.prefix ?? ''}${key}`;
  }

  async put(key: string, body: Readable | Uint8Array, opts: PutOptions): Promise<PutResult> {
    const Key = this.objectKey(key);
    const meter = new Meter(opts.maxBytes);
    const source = toReadable(body);
    source.on('error', (err) => meter.destroy(err));
    source.pipe(meter);
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.opts.bucket, Key, Body: meter, ContentType: opts.contentType },
      queueSize: 2,
      partSize: 8 * 1024 * 1024,
      leavePartsOnError: false,
    });
    try {
      await upload.done();
    } catch (err) {
      source.destroy();
      // A failed multipart upload is aborted by lib-storage; a single-part one may have landed.
      await this.client.send(new DeleteObjectCommand({ Bucket: this.opts.bucket, Key })).catch(() => {});
      // lib-storage wraps the body's error; give the caller the original (e.g. SizeLimitError).
      throw meter.errored ?? err;
    }
    return { size: meter.size, sha256: meter.sha256() };
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    try {
      const out = await this.client.send(
        new GetObjectCommand({
          Bucket: this.opts.bucket,
          Key: this.objectKey(key),
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
      );
      return out.Body as Readable;
    } catch (err) {
      if (isNotFound(err)) throw new ObjectNotFoundError(key);
      throw err;
    }
  }

  async stat(key: string): Promise<ObjectStat | undefined> {
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.opts.bucket, Key: this.objectKey(key) }));
      return { size: Number(out.ContentLength ?? 0), contentType: out.ContentType ?? 'application/octet-stream' };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.opts.bucket, Key: this.objectKey(key) }));
  }

  /** Where an object is addressed: the scheme, host and decoded path of its URL. */
  private address(objectKey: string): { protocol: 'http:' | 'https:'; host: string; path: string } {
    if (this.opts.endpoint) {
      const u = new URL(this.opts.endpoint);
      return {
        protocol: u.protocol === 'http:' ? 'http:' : 'https:',
        host: u.host,
        path: `${u.pathname.replace(/\/$/, '')}/${this.opts.bucket}/${objectKey}`,
      };
    }
    if (this.opts.bucket.includes('.'))
      return { protocol: 'https:', host: `s3.${this.region}.amazonaws.com`, path: `/${this.opts.bucket}/${objectKey}` };
    return { protocol: 'https:', host: `${this.opts.bucket}.s3.${this.region}.amazonaws.com`, path: `/${objectKey}` };
  }

  async signedUrl(key: string, ttlSeconds: number): Promise<string> {
    const creds = await this.client.config.credentials();
    return presignGetUrl({
      ...this.address(this.objectKey(key)),
      region: this.region,
      accessKeyId: creds.accessKeyId,
      secretAccessKey: creds.secretAccessKey,
      sessionToken: creds.sessionToken,
      expiresSeconds: clampTtl(ttlSeconds),
    });
  }

  /**
   * A presigned GET URL of this bucket (and prefix) is ours: its signature is checked by presigning
   * the same object again with the URL's own date and lifetime and comparing the two.
   */
  async resolveSignedUrl(url: string): Promise<SignedUrlMatch | undefined> {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return undefined;
    }
    const root = this.address(this.opts.prefix ?? '');
    let path: string;
    try {
      path = decodeURIComponent(u.pathname);
    } catch {
      return undefined;
    }
    if (
      u.protocol !== root.protocol ||
      u.host !== root.host ||
      !path.startsWith(root.path) ||
      !u.searchParams.has('X-Amz-Signature')
    )
      return undefined;
    const key = path.slice(root.path.length);
    const invalid: SignedUrlMatch = { key, signature: 'invalid' };
    try {
      assertValidKey(key);
    } catch {
      return invalid;
    }
    const date = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(u.searchParams.get('X-Amz-Date') ?? '');
    const expires = Number(u.searchParams.get('X-Amz-Expires'));
    if (!date || !Number.isInteger(expires) || expires < 1 || expires > MAX_SIGNED_URL_TTL_SECONDS) return invalid;
    const signedAt = new Date(Date.UTC(+date[1]!, +date[2]! - 1, +date[3]!, +date[4]!, +date[5]!, +date[6]!));
    const creds = await this.client.config.credentials();
    const expected = new URL(
      presignGetUrl({
        ...this.address(this.objectKey(key)),
        region: this.region,
        accessKeyId: creds.accessKeyId,
        secretAccessKey: creds.secretAccessKey,
        sessionToken: creds.sessionToken,
        expiresSeconds: expires,
        now: signedAt,
      }),
    ).searchParams.get('X-Amz-Signature')!;
    const given = u.searchParams.get('X-Amz-Signature')!;
    if (given.length !== expected.length || !timingSafeEqual(Buffer.from(given), Buffer.from(expected))) return invalid;
    return { key, signature: signedAt.getTime() + expires * 1000 <= Date.now() ? 'expired' : 'valid' };
  }
}
