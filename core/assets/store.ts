import type { Readable } from 'node:stream';
import type { Sql, Tx } from '../platform/db/index.ts';
import { ApiError, notFound } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { checkUrl, SafeFetchError, type SafeFetcher } from '../platform/net/safe-fetch.ts';
import { encodeCursor, type PagePosition } from '../platform/paging.ts';
import { SizeLimitError, type ByteRange, type ObjectStorage } from '../platform/storage/index.ts';
import { assetUsers, isUsed, type AssetUsers } from './references.ts';
import { sniff } from './sniff.ts';
import { ASSET_MAX_BYTES, type AssetKind, type AssetRecord, type AssetStatus } from './types.ts';

interface AssetRow {
  id: string;
  tenant_id: string;
  kind: AssetKind;
  status: AssetStatus;
  content_type: string | null;
  size_bytes: number | null;
  sha256: string | null;
  storage_key: string | null;
  original_filename: string | null;
  source_url: string | null;
  metadata: Record<string, unknown> | null;
  error: string | null;
  created_at: Date;
  updated_at: Date;
}

const toRecord = (r: AssetRow): AssetRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  kind: r.kind,
  status: r.status,
  contentType: r.content_type,
  sizeBytes: r.size_bytes,
  sha256: r.sha256,
  storageKey: r.storage_key,
  originalFilename: r.original_filename,
  sourceUrl: r.source_url,
  metadata: r.metadata ?? {},
  error: r.error,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/** Why bytes were refused; the API turns each into its error (422, 413). */
export type IngestFailure =
  | { reason: 'empty' }
  | { reason: 'unsupported_type'; detectedMime?: string }
  | { reason: 'kind_mismatch'; declared: AssetKind; sniffed: AssetKind; contentType: string }
  | { reason: 'too_large'; kind: AssetKind; maxBytes: number };

export class AssetIngestError extends Error {
  override name = 'AssetIngestError';
  constructor(readonly failure: IngestFailure) {
    super(`Asset refused: ${failure.reason}`);
  }
}

export interface StoredBytes {
  kind: AssetKind;
  contentType: string;
  sizeBytes: number;
  sha256: string;
  storageKey: string;
}

/** Where an asset's bytes live in object storage. */
function assetStorageKey(tenantId: string, assetId: string): string {
  return `tenants/${tenantId}/assets/${assetId}`;
}

/** The largest page of GET /assets, and its default (a bare GET /assets answers the newest 100, as it always did). */
export const MAX_LIST = 100;

export interface AssetListQuery {
  /** The position after which the page starts (a decoded nextCursor). */
  after?: PagePosition;
  /** 1 to MAX_LIST. */
  limit: number;
  status?: AssetStatus;
  kind?: AssetKind;
}

/** 409 asset_in_use: the message and `usedBy` name what uses the asset. */
function assetInUse(assetId: string, users: AssetUsers): ApiError {
  const named = [
    ...users.avatarIds.map((id) => `the portrait of avatar ${id}`),
    ...users.clips.map((c) => `the source of clip ${c.clipId} of avatar ${c.avatarId}`),
  ];
  return new ApiError(
    'asset_in_use',
    `Asset ${assetId} is in use (${named.join('; ')}): delete those avatars, swap their portrait, or re-declare those clips without it first`,
    { usedBy: users },
  );
}

/** A remote import that failed: the asset row (now `failed`) and why. */
export class RemoteImportError extends Error {
  override name = 'RemoteImportError';
  constructor(
    readonly asset: AssetRecord | undefined,
    override readonly cause: SafeFetchError | AssetIngestError,
  ) {
    super(cause.message);
  }
}

/** The `error` stored on a failed asset row. */
function failureCode(err: SafeFetchError | AssetIngestError): string {
  if (err instanceof AssetIngestError) return err.failure.reason;
  return err.reason === 'forbidden_address' || err.reason === 'too_many_redirects'
    ? 'remote_url_refused'
    : `remote_${err.reason}`;
}

/**
 * Tenant assets: rows in `assets` (migration 0003) and their bytes in object storage. Every read
 * takes the tenant id: another tenant's asset does not exist for the caller.
 */
export class AssetStore {
  constructor(
    private readonly sql: Sql,
    readonly storage: ObjectStorage,
  ) {}

  /**
   * Streams `source` into storage under the asset's key: the type is sniffed from the first bytes,
   * must be accepted and agree with `declaredKind`, and the kind's size cap holds while the bytes
   * stream. On any failure nothing stays stored (AssetIngestError for refused bytes).
   */
  async storeBytes(
    tenantId: string,
    assetId: string,
    source: Readable,
    declaredKind?: AssetKind,
  ): Promise<StoredBytes> {
    let sniffed;
    try {
      sniffed = await sniff(source);
    } catch (err) {
      source.destroy();
      throw err;
    }
    const refuse = (failure: IngestFailure): never => {
      sniffed.stream.destroy();
      throw new AssetIngestError(failure);
    };
    if (sniffed.empty) return refuse({ reason: 'empty' });
    const type = sniffed.type;
    if (!type) return refuse({ reason: 'unsupported_type', detectedMime: sniffed.detectedMime });
    if (declaredKind && declaredKind !== type.kind) {
      return refuse({
        reason: 'kind_mismatch',
        declared: declaredKind,
        sniffed: type.kind,
        contentType: type.contentType,
      });
    }
    const storageKey = assetStorageKey(tenantId, assetId);
    const maxBytes = ASSET_MAX_BYTES[type.kind];
    try {
      const put = await this.storage.put(storageKey, sniffed.stream, { contentType: type.contentType, maxBytes });
      return { kind: type.kind, contentType: type.contentType, sizeBytes: put.size, sha256: put.sha256, storageKey };
    } catch (err) {
      sniffed.stream.destroy();
      if (err instanceof SizeLimitError) throw new AssetIngestError({ reason: 'too_large', kind: type.kind, maxBytes });
      throw err;
    }
  }

  /**
   * An upload: the bytes are stored first, then the row is written `ready`, so a refused or failed
   * upload leaves neither bytes nor a row.
   */
  async createUploaded(input: {
    tenantId: string;
    source: Readable;
    declaredKind?: AssetKind;
    originalFilename?: string | null;
    metadata?: Record<string, unknown>;
  }): Promise<AssetRecord> {
    const id = newId('asset');
    const stored = await this.storeBytes(input.tenantId, id, input.source, input.declaredKind);
    return this.recordUploaded({
      tenantId: input.tenantId,
      id,
      stored,
      originalFilename: input.originalFilename,
      metadata: input.metadata,
    });
  }

  /** The `ready` row of bytes already stored under `id` by storeBytes; the bytes are deleted if it cannot be written. */
  async recordUploaded(input: {
    tenantId: string;
    id: string;
    stored: StoredBytes;
    originalFilename?: string | null;
    metadata?: Record<string, unknown>;
  }): Promise<AssetRecord> {
    const { stored } = input;
    try {
      const [row] = await this.sql<AssetRow[]>`
        insert into assets (id, tenant_id, kind, status, content_type, size_bytes, sha256, storage_key, original_filename, metadata)
        values (${input.id}, ${input.tenantId}, ${stored.kind}, 'ready', ${stored.contentType}, ${stored.sizeBytes}, ${stored.sha256},
                ${stored.storageKey}, ${input.originalFilename ?? null}, ${this.sql.json((input.metadata ?? {}) as never)})
        returning *`;
      return toRecord(row!);
    } catch (err) {
      await this.storage.delete(stored.storageKey).catch(() => {});
      throw err;
    }
  }

  /** A row for bytes that are about to stream in (remote imports): `pending_upload`. */
  async createPending(input: {
    tenantId: string;
    kind: AssetKind;
    sourceUrl?: string | null;
    originalFilename?: string | null;
    metadata?: Record<string, unknown>;
  }): Promise<AssetRecord> {
    const [row] = await this.sql<AssetRow[]>`
      insert into assets (id, tenant_id, kind, status, source_url, original_filename, metadata)
      values (${newId('asset')}, ${input.tenantId}, ${input.kind}, 'pending_upload', ${input.sourceUrl ?? null},
              ${input.originalFilename ?? null}, ${this.sql.json((input.metadata ?? {}) as never)})
      returning *`;
    return toRecord(row!);
  }

  /** pending_upload to ready, with what the bytes turned out to be. */
  async markReady(tenantId: string, id: string, stored: StoredBytes): Promise<AssetRecord> {
    const [row] = await this.sql<AssetRow[]>`
      update assets set status = 'ready', kind = ${stored.kind}, content_type = ${stored.contentType}, size_bytes = ${stored.sizeBytes},
             sha256 = ${stored.sha256}, storage_key = ${stored.storageKey}, error = null, updated_at = now()
      where id = ${id} and tenant_id = ${tenantId} and status = 'pending_upload' and deleted_at is null
      returning *`;
    if (!row) throw new Error(`Asset ${id} is no longer pending`);
    return toRecord(row);
  }

  /** pending_upload to failed, with a short machine-readable reason. */
  async markFailed(tenantId: string, id: string, error: string): Promise<AssetRecord | undefined> {
    const [row] = await this.sql<AssetRow[]>`
      update assets set status = 'failed', error = ${error}, updated_at = now()
      where id = ${id} and tenant_id = ${tenantId} and status = 'pending_upload' and deleted_at is null
      returning *`;
    return row && toRecord(row);
  }

  /**
   * POST /assets/remote: a `pending_upload` row, then the remote file streamed through the safe
   * fetcher into storage (sniffed, kind-checked and capped like an upload), then `ready`. On any
   * refusal or failure the row becomes `failed` with `error` and RemoteImportError is thrown.
   * A URL refused by its form alone (scheme, credentials) is refused before any row is written.
   */
  async importRemote(
    input: {
      tenantId: string;
      kind: AssetKind;
      remoteUrl: string;
      originalFilename?: string | null;
      metadata?: Record<string, unknown>;
    },
    fetcher: SafeFetcher,
  ): Promise<AssetRecord> {
    try {
      checkUrl(input.remoteUrl);
    } catch (err) {
      if (err instanceof SafeFetchError && err.reason === 'invalid_url') throw new RemoteImportError(undefined, err);
      // A forbidden literal address still gets its failed row, like every other refusal.
    }
    const pending = await this.createPending({
      tenantId: input.tenantId,
      kind: input.kind,
      sourceUrl: input.remoteUrl,
      originalFilename: input.originalFilename ?? null,
      metadata: input.metadata,
    });
    try {
      const res = await fetcher.fetch(input.remoteUrl, { maxBytes: ASSET_MAX_BYTES[input.kind] });
      let stored: StoredBytes;
      try {
        stored = await this.storeBytes(input.tenantId, pending.id, res.body, input.kind);
      } catch (err) {
        res.body.destroy();
        // The body's own failure (cap, timeout, upstream reset) says more than the store's.
        const bodyErr = res.body.errored;
        throw bodyErr instanceof SafeFetchError ? bodyErr : err;
      }
      try {
        return await this.markReady(input.tenantId, pending.id, stored);
      } catch (err) {
        await this.storage.delete(stored.storageKey).catch(() => {});
        // Deleted (DELETE /assets/{id}) while the bytes streamed in: it stays deleted, with no bytes.
        if (!(await this.get(input.tenantId, pending.id))) {
          throw new ApiError('not_found', `Asset ${pending.id} was deleted while its bytes streamed in`, {
            assetId: pending.id,
          });
        }
        throw err;
      }
    } catch (err) {
      if (err instanceof SafeFetchError || err instanceof AssetIngestError) {
        const failed = await this.markFailed(input.tenantId, pending.id, failureCode(err));
        throw new RemoteImportError(failed, err);
      }
      await this.markFailed(input.tenantId, pending.id, 'internal_error').catch(() => {});
      throw err;
    }
  }

  /** The tenant's asset, or undefined (also for another tenant's id and a deleted asset). */
  async get(tenantId: string, id: string): Promise<AssetRecord | undefined> {
    const [row] = await this.sql<
      AssetRow[]
    >`select * from assets where id = ${id} and tenant_id = ${tenantId} and deleted_at is null`;
    return row && toRecord(row);
  }

  /**
   * Most recently created first, keyset-paged on (created_at, id): every asset is reachable, however
   * many came after it. `nextCursor` is null on the last page.
   */
  async list(tenantId: string, q: AssetListQuery): Promise<{ data: AssetRecord[]; nextCursor: string | null }> {
    const sql = this.sql;
    const limit = Math.min(Math.max(1, Math.floor(q.limit)), MAX_LIST);
    const rows = await sql<AssetRow[]>`
      select * from assets
      where tenant_id = ${tenantId} and deleted_at is null
        ${q.status !== undefined ? sql`and status = ${q.status}` : sql``}
        ${q.kind !== undefined ? sql`and kind = ${q.kind}` : sql``}
        ${q.after ? sql`and (created_at, id) < (${q.after.createdAt}, ${q.after.id})` : sql``}
      order by created_at desc, id desc
      limit ${limit + 1}`;
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      data: page.map(toRecord),
      nextCursor: rows.length > limit && last ? encodeCursor(last.created_at, last.id) : null,
    };
  }

  /**
   * DELETE /assets/{id}: refused (409 asset_in_use, naming them) while a live avatar or clip uses
   * the asset; otherwise its bytes are removed from storage and the row is soft-deleted, gone from
   * every read (404). Under the row's lock, so a writer that holds it (holdForUse) either commits
   * its use first, and is seen here, or finds the asset deleted.
   */
  async remove(tenantId: string, id: string): Promise<void> {
    await this.sql.begin(async (tx) => {
      const [row] = await tx<AssetRow[]>`
        select * from assets where id = ${id} and tenant_id = ${tenantId} and deleted_at is null for update`;
      if (!row) throw notFound(`Asset ${id.slice(0, 80)}`);
      const users = await assetUsers(tx, tenantId, id);
      if (isUsed(users)) throw assetInUse(id, users);
      await tx`update assets set deleted_at = now(), updated_at = now(), storage_key = null where id = ${id}`;
      // Inside the transaction: if the bytes cannot be deleted, the asset stays as it was and a retry works.
      if (row.storage_key) await this.storage.delete(row.storage_key);
    });
  }

  /**
   * For a writer about to make the tenant's asset its portrait or clip source, inside its
   * transaction: locks the row against a concurrent delete until the transaction ends. False when
   * the asset is gone (deleted, or never this tenant's).
   */
  async holdForUse(tx: Tx, tenantId: string, id: string): Promise<boolean> {
    const [row] = await tx<{ id: string }[]>`
      select id from assets where id = ${id} and tenant_id = ${tenantId} and deleted_at is null for share`;
    return row !== undefined;
  }

  /** The bytes of a ready asset as a stream (optionally a byte range), for renderers and jobs. */
  async openStream(tenantId: string, id: string, range?: ByteRange): Promise<Readable> {
    const asset = await this.get(tenantId, id);
    if (!asset || asset.status !== 'ready' || !asset.storageKey)
      throw new Error(`Asset ${id} is not ready for tenant ${tenantId}`);
    return this.storage.get(asset.storageKey, range);
  }

  /** The bytes of a ready asset in memory, refusing more than maxBytes (a portrait for the rig). */
  async readBytes(tenantId: string, id: string, maxBytes = 32 * 1024 * 1024): Promise<Buffer> {
    const stream = await this.openStream(tenantId, id);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) {
        stream.destroy();
        throw new Error(`Asset ${id} exceeds ${maxBytes} bytes`);
      }
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  }

  /** A signed, expiring URL of a ready asset's bytes (null otherwise). */
  async publicUrl(asset: AssetRecord, ttlSeconds: number): Promise<string | null> {
    return asset.status === 'ready' && asset.storageKey ? this.storage.signedUrl(asset.storageKey, ttlSeconds) : null;
  }
}
