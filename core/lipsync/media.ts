import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ACCEPTED_TYPES, sniff, type AssetKind } from '../assets/index.ts';
import { ApiError } from '../platform/errors.ts';
import { fetchFailure } from '../platform/net/fetch-errors.ts';
import { SafeFetchError, type SafeFetcher } from '../platform/net/safe-fetch.ts';
import { ObjectNotFoundError, type ObjectStorage } from '../platform/storage/index.ts';

/** A media file a request named by URL, now on local disk. */
export interface FetchedMedia {
  path: string;
  contentType: string;
  sizeBytes: number;
  /** Lowercase hex SHA-256 of the bytes. */
  sha256: string;
  /** `storage`: one of the service's own signed URLs, read from object storage; `network`: fetched. */
  source: 'storage' | 'network';
}

export interface FetchMediaInput {
  url: string;
  /** The request field that held the URL: every refusal names it. */
  field: string;
  kind: AssetKind;
  maxBytes: number;
  tenantId: string;
  /** Where the bytes are written. */
  path: string;
  signal?: AbortSignal;
}

const accepted = (kind: AssetKind) =>
  [
    ...new Set(
      Object.entries(ACCEPTED_TYPES)
        .filter(([, t]) => t.kind === kind)
        .map(([ext]) => ext),
    ),
  ].join(', ');

/**
 * Reads a media file a user named by URL. One of the service's own signed media URLs (an asset's
 * `publicUrl`, a lipsync result) is read from object storage directly once its signature checks
 * out, never fetched over the network; it must be the caller's workspace's own and unexpired. Any
 * other URL goes through the safe fetcher (public addresses only, redirects checked). Either way
 * the type is sniffed from the bytes and must be of `kind`, and the size is capped while the bytes
 * stream. Refusals are ApiErrors naming `field`.
 */
export async function fetchMedia(
  input: FetchMediaInput,
  deps: { storage: ObjectStorage; fetcher: SafeFetcher },
): Promise<FetchedMedia> {
  const { field } = input;
  let body: Readable;
  let source: FetchedMedia['source'];
  const own = await deps.storage.resolveSignedUrl(input.url);
  if (own) {
    source = 'storage';
    if (own.signature === 'expired') {
      throw new ApiError(
        'media_url_expired',
        `Invalid field "${field}": this signed media URL has expired: get a fresh one from the API (an asset's publicUrl lasts an hour)`,
        { field },
      );
    }
    if (own.signature === 'invalid')
      throw new ApiError('validation_error', `Invalid field "${field}": the signature of this media URL is not valid`, {
        field,
      });
    if (!own.key.startsWith(`tenants/${input.tenantId}/`)) {
      throw new ApiError('validation_error', `Invalid field "${field}": this media URL belongs to another workspace`, {
        field,
      });
    }
    try {
      body = await deps.storage.get(own.key);
    } catch (err) {
      if (err instanceof ObjectNotFoundError)
        throw new ApiError('validation_error', `Invalid field "${field}": the media this URL named no longer exists`, {
          field,
        });
      throw err;
    }
  } else {
    source = 'network';
    try {
      body = (await deps.fetcher.fetch(input.url, { maxBytes: input.maxBytes, signal: input.signal })).body;
    } catch (err) {
      if (err instanceof SafeFetchError) throw fetchFailure(err, field);
      throw err;
    }
  }

  const sniffed = await sniff(body).catch((err: unknown) => {
    body.destroy();
    throw err instanceof SafeFetchError ? fetchFailure(err, field) : err;
  });
  const refuse = (e: ApiError): never => {
    sniffed.stream.destroy();
    throw e;
  };
  if (sniffed.empty) refuse(new ApiError('validation_error', `Invalid field "${field}": the file is empty`, { field }));
  if (sniffed.type?.kind !== input.kind) {
    const what = sniffed.type
      ? `${sniffed.type.contentType} (${sniffed.type.kind})`
      : (sniffed.detectedMime ?? 'of no recognised type');
    refuse(
      new ApiError(
        'unsupported_asset_type',
        `Invalid field "${field}": the file is ${what}, not ${input.kind}; accepted: ${accepted(input.kind)}`,
        {
          field,
          detectedType: sniffed.type?.contentType ?? sniffed.detectedMime ?? null,
        },
      ),
    );
  }

  const hash = createHash('sha256');
  let size = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      if (size > input.maxBytes)
        return cb(new SafeFetchError('too_large', `The file exceeds the cap of ${input.maxBytes} bytes`));
      hash.update(chunk);
      cb(null, chunk);
    },
  });
  try {
    await pipeline(sniffed.stream, meter, createWriteStream(input.path, { mode: 0o600 }), { signal: input.signal });
  } catch (err) {
    const cause =
      err instanceof SafeFetchError ? err : body.errored instanceof SafeFetchError ? body.errored : undefined;
    if (cause) throw fetchFailure(cause, field);
    throw err;
  }
  return {
    path: input.path,
    contentType: sniffed.type!.contentType,
    sizeBytes: size,
    sha256: hash.digest('hex'),
    source,
  };
}
