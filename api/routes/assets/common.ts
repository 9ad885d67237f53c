import { z } from '@hono/zod-openapi';
import {
  AssetIngestError,
  ASSET_KINDS,
  ASSET_MAX_BYTES,
  ASSET_STATUSES,
  RemoteImportError,
  type AssetRecord,
  type AssetStore,
} from '../../../core/assets/index.ts';
import { ApiError, notFound } from '../../../core/platform/errors.ts';
import { fetchFailure } from '../../../core/platform/net/fetch-errors.ts';
import { SafeFetchError } from '../../../core/platform/net/safe-fetch.ts';
import { Timestamp } from '../../schemas/common.ts';

/** Lifetime of the signed publicUrl in asset responses: playback URLs last at most an hour. */
const ASSET_URL_TTL_SECONDS = 3600;

export const AssetKindSchema = z.enum(ASSET_KINDS);
export const AssetStatusSchema = z.enum(ASSET_STATUSES);

/** Any assetId that names no live asset of the caller's tenant is 404, whatever its shape. */
export const AssetIdParam = z.object({
  assetId: z.string().openapi({
    param: { name: 'assetId', in: 'path' },
    example: 'ast_4bQh2vX9k1LmN0pR7sTu',
    description: 'Starts with ast_',
  }),
});

const ASSET_ID = /^ast_[0-9A-Za-z_-]{1,64}$/;

/** 404 at once for an id that cannot be an asset's (no database round trip). */
export function checkAssetId(assetId: string): string {
  if (!ASSET_ID.test(assetId)) throw notFound(`Asset ${assetId.slice(0, 80)}`);
  return assetId;
}

export const AssetSchema = z
  .object({
    id: z.string().openapi({ example: 'ast_4bQh2vX9k1LmN0pR7sTu' }),
    tenantId: z.string(),
    kind: AssetKindSchema,
    status: AssetStatusSchema,
    contentType: z.string().nullable().openapi({ description: 'Sniffed from the bytes; null until ready.' }),
    sizeBytes: z.number().int().nullable(),
    sha256: z.string().nullable().openapi({ description: 'Lowercase hex SHA-256 of the stored bytes.' }),
    publicUrl: z.string().nullable().openapi({
      format: 'uri',
      description: 'Signed GET URL of the bytes, valid for one hour from this response; null unless ready.',
    }),
    originalFilename: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()),
    error: z.string().nullable().openapi({ description: 'Why, when status is failed.' }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .openapi('Asset');

export type AssetWire = z.infer<typeof AssetSchema>;

export async function toWire(assets: AssetStore, a: AssetRecord): Promise<AssetWire> {
  return {
    id: a.id,
    tenantId: a.tenantId,
    kind: a.kind,
    status: a.status,
    contentType: a.contentType,
    sizeBytes: a.sizeBytes,
    sha256: a.sha256,
    publicUrl: await assets.publicUrl(a, ASSET_URL_TTL_SECONDS),
    originalFilename: a.originalFilename,
    metadata: a.metadata,
    error: a.error,
    createdAt: a.createdAt.toISOString(),
    updatedAt: a.updatedAt.toISOString(),
  };
}

const ACCEPTED = 'image (jpeg, png, webp), video (mp4, quicktime, webm), audio (wav, mp3, ogg, flac, m4a)';

/**
 * The API error for refused bytes or a refused fetch. `field` names where the bytes came from:
 * "file" for an upload, "remoteUrl" for a remote import.
 */
export function assetError(err: unknown, field: 'file' | 'remoteUrl'): unknown {
  const assetId = err instanceof RemoteImportError ? err.asset?.id : undefined;
  const extra = assetId ? { assetId } : {};
  const cause = err instanceof RemoteImportError ? err.cause : err;
  if (cause instanceof AssetIngestError) {
    const f = cause.failure;
    switch (f.reason) {
      case 'empty':
        return new ApiError('validation_error', `Invalid field "${field}": the file is empty`, { field, ...extra });
      case 'unsupported_type':
        return new ApiError(
          'unsupported_asset_type',
          `Invalid field "${field}": the bytes are ${f.detectedMime ?? 'of no recognised type'}; accepted: ${ACCEPTED}`,
          { field, detectedType: f.detectedMime ?? null, ...extra },
        );
      case 'kind_mismatch':
        return new ApiError(
          'validation_error',
          `Invalid field "kind": declared ${f.declared}, but the bytes are ${f.contentType} (${f.sniffed})`,
          {
            field: 'kind',
            detectedType: f.contentType,
            ...extra,
          },
        );
      case 'too_large':
        return new ApiError('payload_too_large', `The ${f.kind} exceeds the ${f.kind} cap of ${f.maxBytes} bytes`, {
          field,
          maxBytes: f.maxBytes,
          kind: f.kind,
          ...extra,
        });
    }
  }
  if (cause instanceof SafeFetchError) return fetchFailure(cause, field, extra);
  return err;
}

/** Per-kind caps, for route descriptions. */
export const CAPS_TEXT = `Caps: image ${ASSET_MAX_BYTES.image} bytes, video ${ASSET_MAX_BYTES.video} bytes, audio ${ASSET_MAX_BYTES.audio} bytes.`;
