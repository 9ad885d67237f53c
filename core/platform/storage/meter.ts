import { createHash } from 'node:crypto';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { SizeLimitError } from './types.ts';

/** A pass-through that counts and hashes the bytes, and fails with SizeLimitError past maxBytes. */
export class Meter extends Transform {
  size = 0;
  private readonly hash = createHash('sha256');
  private digest?: string;

  constructor(private readonly maxBytes = Number.POSITIVE_INFINITY) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) return cb(new SizeLimitError(this.maxBytes));
    this.hash.update(chunk);
    cb(null, chunk);
  }

  /** Hex SHA-256 of everything that passed; call once the stream has ended. */
  sha256(): string {
    this.digest ??= this.hash.digest('hex');
    return this.digest;
  }
}

export function toReadable(body: Readable | Uint8Array): Readable {
  return body instanceof Readable ? body : Readable.from([Buffer.from(body.buffer, body.byteOffset, body.byteLength)]);
}
