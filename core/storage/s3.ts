import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { Readable } from 'node:stream';
import { Meter, toReadable } from './meter.ts';
import { presignGetUrl } from './sigv4.ts';
import { assertValidKey, clampTtl, ObjectNotFoundError, type ByteRange, type ObjectStat, type ObjectStorage, type PutOptions, type PutResult } from './types.ts';

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
      credentials: opts.accessKeyId && opts.secretAccessKey ? { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey } : undefined,
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
        new GetObjectCommand({ Bucket: this.opts.bucket, Key: this.objectKey(key), Range: range ? `bytes=${range.start}-${range.end}` : undefined }),
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

  async signedUrl(key: string, ttlSeconds: number): Promise<string> {
    const objectKey = this.objectKey(key);
    const creds = await this.client.config.credentials();
    let protocol: 'http:' | 'https:' = 'https:';
    let host: string;
    let path: string;
    if (this.opts.endpoint) {
      const u = new URL(this.opts.endpoint);
      protocol = u.protocol === 'http:' ? 'http:' : 'https:';
      host = u.host;
      path = `${u.pathname.replace(/\/$/, '')}/${this.opts.bucket}/${objectKey}`;
    } else if (this.opts.bucket.includes('.')) {
      host = `s3.${this.region}.amazonaws.com`;
      path = `/${this.opts.bucket}/${objectKey}`;
    } else {
      host = `${this.opts.bucket}.s3.${this.region}.amazonaws.com`;
      path = `/${objectKey}`;
    }
    return presignGetUrl({
      protocol,
      host,
      path,
      region: this.region,
      accessKeyId: creds.accessKeyId,
      secretAccessKey: creds.secretAccessKey,
      sessionToken: creds.sessionToken,
      expiresSeconds: clampTtl(ttlSeconds),
    });
  }
}
