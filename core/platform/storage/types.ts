import type { Readable } from 'node:stream';

/** What `put` learned while the bytes streamed through. */
export interface PutResult {
  size: number;
  /** Lowercase hex SHA-256 of the stored bytes. */
  sha256: string;
}

export interface PutOptions {
  contentType: string;
  /** Abort (and store nothing) once more than this many bytes have streamed in. */
  maxBytes?: number;
}

export interface ObjectStat {
  size: number;
  contentType: string;
  /** Lowercase hex SHA-256 where the store knows it (the local store does). */
  sha256?: string;
}

/** An inclusive byte range, as in HTTP: bytes start..end. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * The one object-storage interface: a local folder (DATA_DIR/media, served by the app with signed,
 * expiring URLs) or an S3-compatible bucket (presigned GET URLs). Keys are relative paths of
 * [A-Za-z0-9._-] segments separated by "/".
 */
export interface ObjectStorage {
  readonly kind: 'local' | 's3';
  /** Streams `body` in, hashing as it goes. On any failure (including maxBytes) nothing is left stored. */
  put(key: string, body: Readable | Uint8Array, opts: PutOptions): Promise<PutResult>;
  /** The object's bytes (or an inclusive range of them). Throws ObjectNotFoundError. */
  get(key: string, range?: ByteRange): Promise<Readable>;
  /** Size and content type, or undefined when there is no such object. */
  stat(key: string): Promise<ObjectStat | undefined>;
  /** Removes the object; no error when it does not exist. */
  delete(key: string): Promise<void>;
  /** A URL anyone can GET the object at until it expires (ttlSeconds is clamped to 1..3600). */
  signedUrl(key: string, ttlSeconds: number): Promise<string>;
  /**
   * Whether `url` is one of this store's own signed URLs (as `signedUrl` makes them), and if so
   * which object and whether its signature holds; undefined for any other URL. Lets the service
   * read its own media from storage instead of over the network.
   */
  resolveSignedUrl(url: string): Promise<SignedUrlMatch | undefined>;
}

/** A URL of this store's own: the object's key and the state of its signature. */
export interface SignedUrlMatch {
  key: string;
  /** `expired`: a genuine signature whose time has passed; `invalid`: tampered with, or not made with this store's secret. */
  signature: 'valid' | 'expired' | 'invalid';
}

/** Longest lifetime of a signed URL: playback URLs last at most one hour. */
export const MAX_SIGNED_URL_TTL_SECONDS = 3600;

export function clampTtl(ttlSeconds: number): number {
  if (!Number.isFinite(ttlSeconds)) return MAX_SIGNED_URL_TTL_SECONDS;
  return Math.min(MAX_SIGNED_URL_TTL_SECONDS, Math.max(1, Math.floor(ttlSeconds)));
}

export class ObjectNotFoundError extends Error {
  override name = 'ObjectNotFoundError';
  constructor(readonly key: string) {
    super(`No stored object ${key}`);
  }
}

/** More bytes than `maxBytes` streamed in. */
export class SizeLimitError extends Error {
  override name = 'SizeLimitError';
  constructor(readonly maxBytes: number) {
    super(`Body exceeds the cap of ${maxBytes} bytes`);
  }
}

const KEY_SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

/** Refuses keys that could escape the store's root or collide with its own files. */
export function assertValidKey(key: string): void {
  const segments = key.split('/');
  const ok =
    key.length > 0 &&
    key.length <= 512 &&
    segments.every(
      (s) =>
        KEY_SEGMENT.test(s) &&
        s !== '.' &&
        s !== '..' &&
        !s.includes('..') &&
        !s.endsWith('.meta.json') &&
        !s.includes('.tmp-'),
    );
  if (!ok) throw new Error(`Invalid storage key: ${JSON.stringify(key)}`);
}
