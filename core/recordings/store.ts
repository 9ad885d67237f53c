/**
 * Recordings of calls: a row per recording (`processing` while the call runs and the file is
 * finalised, then `ready` or `failed`) and its MP4 in object storage. The worker writes them; the
 * API reads them. Media past the workspace's retention is deleted by a job.
 */
import type { Sql } from '../platform/db/index.ts';
import { newId } from '../platform/ids.ts';

export type RecordingStatus = 'processing' | 'ready' | 'failed';

/** Storage key of a recording's MP4. */
function recordingKey(tenantId: string, recordingId: string): string {
  return `tenants/${tenantId}/recordings/${recordingId}.mp4`;
}

export class RecordingStore {
  constructor(private readonly sql: Sql) {}

  /** A call starts recording: the row (processing) with its retention deadline from the workspace's policy. */
  async begin(sessionId: string): Promise<{ recordingId: string; storageKey: string }> {
    const [session] = await this.sql<
      { tenant_id: string }[]
    >`select tenant_id from live_sessions where id = ${sessionId}`;
    if (!session) throw new Error(`No live session ${sessionId} to record`);
    const recordingId = newId('recording');
    const storageKey = recordingKey(session.tenant_id, recordingId);
    await this.sql`
      insert into recordings (id, tenant_id, session_id, status, storage_key, retention_expires_at)
      select ${recordingId}, t.id, ${sessionId}, 'processing', ${storageKey}, now() + make_interval(days => t.recording_retention_days)
      from tenants t where t.id = ${session.tenant_id}`;
    return { recordingId, storageKey };
  }

  /** The MP4 is in storage. */
  async ready(recordingId: string, info: { durationSeconds: number; sizeBytes: number }): Promise<void> {
    await this.sql`
      update recordings set status = 'ready', duration_seconds = ${info.durationSeconds}, size_bytes = ${info.sizeBytes},
        ready_at = now(), updated_at = now()
      where id = ${recordingId} and status = 'processing'`;
  }

  async failed(recordingId: string, reason: string): Promise<void> {
    await this.sql`
      update recordings set status = 'failed', error = ${reason.slice(0, 500)}, updated_at = now()
      where id = ${recordingId} and status = 'processing'`;
  }
}
