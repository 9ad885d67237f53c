/**
 * Recordings as the API reads them (docs/recordings.md): the workspace's recording metadata, keyset
 * paged; private playback URLs of ready recordings; and the retention job that deletes media past
 * the workspace's retention and fails recordings whose worker died before finalising them. The
 * agent worker writes recordings through store.ts.
 */
import type { Sql } from '../platform/db/index.ts';
import { ApiError } from '../platform/errors.ts';
import type { Logger } from '../platform/log.ts';
import { MAX_SIGNED_URL_TTL_SECONDS, type ObjectStorage } from '../platform/storage/index.ts';
import { encodeCursor } from '../usage.ts';
import type { RecordingStatus } from './store.ts';

export interface Recording {
  id: string;
  sessionId: string;
  status: RecordingStatus;
  durationSeconds: number | null;
  sizeBytes: number | null;
  contentType: string;
  /** Why a failed recording failed; null otherwise. */
  error: string | null;
  createdAt: Date;
  readyAt: Date | null;
  retentionExpiresAt: Date;
}

export interface RecordingAccess {
  url: string;
  expiresAt: Date;
}

interface RecordingRow {
  id: string;
  tenant_id: string;
  session_id: string;
  status: RecordingStatus;
  error: string | null;
  storage_key: string;
  content_type: string;
  duration_seconds: number | null;
  size_bytes: string | number | null;
  created_at: Date;
  ready_at: Date | null;
  retention_expires_at: Date;
  media_deleted_at: Date | null;
}

const toRecording = (r: RecordingRow): Recording => ({
  id: r.id,
  sessionId: r.session_id,
  status: r.status,
  durationSeconds: r.duration_seconds,
  sizeBytes: r.size_bytes === null ? null : Number(r.size_bytes),
  contentType: r.content_type,
  error: r.status === 'failed' ? r.error : null,
  createdAt: r.created_at,
  readyAt: r.ready_at,
  retentionExpiresAt: r.retention_expires_at,
});

/** The periodic retention job (core/platform/jobs/periodic.ts). */
export const RECORDING_RETENTION_JOB = 'recording-retention';

export interface RecordingLibraryDeps {
  sql: Sql;
  storage: ObjectStorage;
  log: Logger;
  /** A recording still processing this long after its call ended is failed (RECORDING_FINALIZE_TIMEOUT_SECONDS). */
  finalizeTimeoutSeconds: number;
}

const notFound = (id: string) =>
  new ApiError('not_found', `Recording ${id.slice(0, 80)} not found, or it does not belong to this tenant`);

export class RecordingLibrary {
  constructor(private readonly d: RecordingLibraryDeps) {}

  /** The workspace's recordings, newest first, keyset-paged; `sessionId` narrows to one call. */
  async list(
    tenantId: string,
    q: { sessionId?: string; after?: { createdAt: Date; id: string }; limit: number },
  ): Promise<{ data: Recording[]; nextCursor: string | null }> {
    const sql = this.d.sql;
    const rows = await sql<RecordingRow[]>`
      select * from recordings
      where tenant_id = ${tenantId}
        ${q.sessionId !== undefined ? sql`and session_id = ${q.sessionId}` : sql``}
        ${q.after ? sql`and (created_at, id) < (${q.after.createdAt}, ${q.after.id})` : sql``}
      order by created_at desc, id desc
      limit ${q.limit + 1}`;
    const page = rows.slice(0, q.limit);
    const last = page[page.length - 1];
    return {
      data: page.map(toRecording),
      nextCursor: rows.length > q.limit && last ? encodeCursor(last.created_at, last.id) : null,
    };
  }

  private async row(tenantId: string, id: string): Promise<RecordingRow> {
    const [row] = await this.d.sql<
      RecordingRow[]
    >`select * from recordings where id = ${id} and tenant_id = ${tenantId}`;
    if (!row) throw notFound(id);
    return row;
  }

  async get(tenantId: string, id: string): Promise<Recording> {
    return toRecording(await this.row(tenantId, id));
  }

  /**
   * A signed, Range-capable URL of a ready recording's MP4, valid one hour at most and never past
   * the retention deadline; ask again for a fresh one. 409 recording_not_ready while processing
   * (retry), 409 recording_failed for a failed one, 404 recording_expired once retention passed.
   */
  async access(tenantId: string, id: string): Promise<RecordingAccess> {
    const r = await this.row(tenantId, id);
    const now = Date.now();
    if (r.media_deleted_at || r.retention_expires_at.getTime() <= now) {
      throw new ApiError(
        'recording_expired',
        `Recording ${id}'s retention ended on ${r.retention_expires_at.toISOString()}: its media is deleted`,
      );
    }
    if (r.status === 'processing')
      throw new ApiError(
        'recording_not_ready',
        `Recording ${id} is still processing: GET it until its status is ready, then ask again`,
      );
    if (r.status === 'failed')
      throw new ApiError(
        'recording_failed',
        `Recording ${id} failed (${r.error ?? 'no reason given'}): it has no media`,
      );
    // Whole seconds, counted down from before signing: the URL never outlives what we announce.
    const nowSeconds = Math.floor(now / 1000);
    const ttl = Math.min(MAX_SIGNED_URL_TTL_SECONDS, Math.floor(r.retention_expires_at.getTime() / 1000) - nowSeconds);
    if (ttl < 1)
      throw new ApiError('recording_expired', `Recording ${id}'s retention ends now: its media is being deleted`);
    const url = await this.d.storage.signedUrl(r.storage_key, ttl);
    return { url, expiresAt: new Date((nowSeconds + ttl) * 1000) };
  }

  /**
   * The retention job: deletes the media of recordings past their retention (media_deleted_at set;
   * the row stays as metadata), and fails recordings still processing long after their call ended
   * (the worker died before finalising: its partial file, if any, is deleted too). Batches, each
   * row locked (skip locked), so processes may run it at once. Returns what it did.
   */
  async sweep(batch = 100): Promise<{ deleted: number; abandoned: number }> {
    const { sql, storage, log } = this.d;
    let deleted = 0;
    for (;;) {
      const done = await sql.begin(async (tx) => {
        const due = await tx<{ id: string; storage_key: string }[]>`
          select id, storage_key from recordings
          where retention_expires_at <= now() and media_deleted_at is null
          order by retention_expires_at limit ${batch} for update skip locked`;
        for (const r of due) {
          // A failed delete throws: the transaction rolls back and the job retries.
          await storage.delete(r.storage_key);
          await tx`update recordings set media_deleted_at = now(), updated_at = now() where id = ${r.id}`;
        }
        return due.length;
      });
      deleted += done;
      if (done < batch) break;
    }
    const abandoned = await sql<{ id: string; storage_key: string }[]>`
      update recordings r set status = 'failed', updated_at = now(),
        error = 'The recording was never finalised: its call ended at ' || to_char(s.ended_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ' and the worker stopped before finishing the file'
      from live_sessions s
      where s.id = r.session_id and r.status = 'processing' and s.state = 'ended'
        and s.ended_at < now() - make_interval(secs => ${this.d.finalizeTimeoutSeconds})
      returning r.id, r.storage_key`;
    for (const r of abandoned)
      await storage
        .delete(r.storage_key)
        .catch((err: unknown) => log.warn({ err, recordingId: r.id }, 'could not delete a partial recording'));
    if (deleted || abandoned.length) log.info({ deleted, abandoned: abandoned.length }, 'recording retention pass');
    return { deleted, abandoned: abandoned.length };
  }
}
