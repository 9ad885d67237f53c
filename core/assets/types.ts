import type { FileTypeResult } from 'file-type';

export const ASSET_KINDS = ['image', 'video', 'audio'] as const;
export type AssetKind = (typeof ASSET_KINDS)[number];
export const ASSET_STATUSES = ['pending_upload', 'ready', 'failed'] as const;
export type AssetStatus = (typeof ASSET_STATUSES)[number];

/**
 * Largest accepted file per kind, enforced while the bytes stream (docs/assets.md). Video is held
 * to the 18 MB clip quality-check ceiling, so any stored video can serve as a clip source.
 */
export const ASSET_MAX_BYTES: Record<AssetKind, number> = {
  image: 20 * 1024 * 1024,
  video: 18 * 1000 * 1000,
  audio: 50 * 1024 * 1024,
};

export const LARGEST_ASSET_BYTES = Math.max(...Object.values(ASSET_MAX_BYTES));

/** Accepted types, by file-type's sniffed extension: the kind and the content type we store. */
export const ACCEPTED_TYPES: Record<string, { kind: AssetKind; contentType: string }> = {
  jpg: { kind: 'image', contentType: 'image/jpeg' },
  png: { kind: 'image', contentType: 'image/png' },
  webp: { kind: 'image', contentType: 'image/webp' },
  mp4: { kind: 'video', contentType: 'video/mp4' },
  mov: { kind: 'video', contentType: 'video/quicktime' },
  webm: { kind: 'video', contentType: 'video/webm' },
  wav: { kind: 'audio', contentType: 'audio/wav' },
  mp3: { kind: 'audio', contentType: 'audio/mpeg' },
  ogg: { kind: 'audio', contentType: 'audio/ogg' },
  oga: { kind: 'audio', contentType: 'audio/ogg' },
  opus: { kind: 'audio', contentType: 'audio/ogg' },
  flac: { kind: 'audio', contentType: 'audio/flac' },
  m4a: { kind: 'audio', contentType: 'audio/mp4' },
};

/** How many leading bytes are read to sniff the type. */
export const SNIFF_BYTES = 64 * 1024;

export function acceptedType(
  detected: FileTypeResult | undefined,
): { kind: AssetKind; contentType: string } | undefined {
  return detected ? ACCEPTED_TYPES[detected.ext] : undefined;
}

/** An asset row (camelCase); `storageKey` is internal and never on the wire. */
export interface AssetRecord {
  id: string;
  tenantId: string;
  kind: AssetKind;
  status: AssetStatus;
  contentType: string | null;
  sizeBytes: number | null;
  sha256: string | null;
  storageKey: string | null;
  originalFilename: string | null;
  sourceUrl: string | null;
  metadata: Record<string, unknown>;
  error: string | null;
  createdAt: Date;
  updatedAt: Date;
}
