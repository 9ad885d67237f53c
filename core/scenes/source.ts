import { createHash } from 'node:crypto';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { SafeFetchError, type SafeFetcher } from '../platform/net/safe-fetch.ts';
import type { SceneErrorCode } from './types.ts';

/** A download that ends the scene: the failed state's `error` and a message for people. */
export class SceneSourceError extends Error {
  override name = 'SceneSourceError';
  constructor(
    readonly error: Exclude<SceneErrorCode, 'build_failed'>,
    message: string,
  ) {
    super(message);
  }
}

/** A pass-through measuring the bytes: count and md5 (the scene id's inputs). */
class ContentMeter extends Transform {
  bytes = 0;
  private readonly hash = createHash('md5');

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    this.hash.update(chunk);
    cb(null, chunk);
  }

  md5(): string {
    return this.hash.digest('hex');
  }
}

export interface SourceContent {
  md5: string;
  bytes: number;
}

/**
 * Downloads a scene's clip through the safe fetcher, streaming it into `sink` (a file, storage)
 * while measuring its md5 and length. With `expected` md5 and bytes (what the client named), a
 * different Content-Length is refused before reading and more bytes than named stop the download.
 *
 * @throws SceneSourceError: `source_unreachable` (the fetch failed: address rules, DNS, connect,
 *   HTTP status, timeouts), `source_unusable` (over `maxBytes`), `source_mismatch` (not the bytes
 *   named). Anything else (the sink's own failure) as it comes.
 */
export async function downloadSource(
  fetcher: SafeFetcher,
  url: string,
  o: { maxBytes: number; expected?: Partial<SourceContent> },
  sink: (body: Readable) => Promise<void>,
): Promise<SourceContent> {
  const named = o.expected?.bytes;
  // Named bytes: one byte more than named is already a mismatch, no need to read further.
  const cap = named !== undefined ? Math.min(o.maxBytes, named) : o.maxBytes;
  const tooLarge = () =>
    named !== undefined && named <= o.maxBytes
      ? new SceneSourceError('source_mismatch', `The clip has more than the ${named} bytes given in source.bytes`)
      : new SceneSourceError('source_unusable', `The clip is over the cap of ${o.maxBytes} bytes`);
  const failure = (err: unknown): unknown => {
    if (!(err instanceof SafeFetchError)) return err;
    if (err.reason === 'too_large') return tooLarge();
    return new SceneSourceError('source_unreachable', `The clip could not be downloaded: ${err.message}`);
  };
  let res;
  try {
    res = await fetcher.fetch(url, { maxBytes: cap });
  } catch (err) {
    throw failure(err);
  }
  if (named !== undefined && res.contentLength !== undefined && res.contentLength !== named) {
    res.body.destroy();
    throw new SceneSourceError(
      'source_mismatch',
      `The clip is ${res.contentLength} bytes, not the ${named} given in source.bytes`,
    );
  }
  const meter = new ContentMeter();
  res.body.on('error', (err) => meter.destroy(err));
  res.body.pipe(meter);
  try {
    await sink(meter);
  } catch (err) {
    res.body.destroy();
    // The body's own failure (cap, timeout, upstream reset) says more than the sink's.
    throw failure(res.body.errored ?? err);
  }
  const got = { md5: meter.md5(), bytes: meter.bytes };
  if (named !== undefined && got.bytes !== named) {
    throw new SceneSourceError(
      'source_mismatch',
      `The clip is ${got.bytes} bytes, not the ${named} given in source.bytes`,
    );
  }
  if (o.expected?.md5 !== undefined && got.md5 !== o.expected.md5.toLowerCase()) {
    throw new SceneSourceError(
      'source_mismatch',
      `The clip's md5 is ${got.md5}, not the ${o.expected.md5.toLowerCase()} given in source.md5`,
    );
  }
  return got;
}
