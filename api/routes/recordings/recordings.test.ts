import { afterAll, describe, expect, it } from 'vitest';
import { startJobWorkers } from '../../../core/wiring/job-workers.ts';
import { RECORDING_RETENTION_JOB } from '../../../core/recordings/library.ts';
import { testVideo } from '../../../render/framecache/test-videos.ts';
import { json, testApi, waitFor, withTamperedSignature } from '../../../test/helpers.ts';
import { recordingFixtures } from './test-support.ts';

/**
 * The recordings API over recordings made the way the agent worker makes them (RecordingStore
 * begin/ready/failed, the MP4 in storage), and the retention job.
 */
const t = await testApi({ env: { MEDIA_SWEEP_SECONDS: '10' } });
afterAll(() => t.close());
const f = recordingFixtures(t);
const MP4 = testVideo({ seconds: 1 });
const R = '/api/v1/recordings';

interface RecordingBody {
  id: string;
  sessionId: string;
  status: string;
  durationSeconds: number | null;
  sizeBytes: number | null;
  contentType: string;
  error: string | null;
  createdAt: string;
  readyAt: string | null;
  retentionExpiresAt: string;
  code?: string;
  field?: string;
  retryable?: boolean;
}

async function call<T = RecordingBody>(key: string, url: string) {
  const res = await t.request('GET', url, { key });
  return { status: res.status, body: await json<T>(res) };
}

async function workspace(scopes?: ('recordings:read' | 'realtime:write')[]) {
  const w = await t.newTenant({ credits: 60, ...(scopes ? { scopes } : {}) });
  return { key: w.apiKey, tenantId: w.tenantId, apiKeyId: w.apiKeyId };
}

/** GETs a signed media URL through the app (local storage is served by it). */
function fetchMedia(url: string, headers: Record<string, string> = {}) {
  const u = new URL(url);
  return t.app.request(`${u.pathname}${u.search}`, { headers });
}

describe('recordings', () => {
  it('happy: lifecycle: processing (no access yet), then ready with a signed, seekable URL of at most an hour, renewable', async () => {
    const w = await workspace();
    const sessionId = await f.liveSession(w.tenantId, w.apiKeyId);
    const rec = await f.recordings.begin(sessionId);
    const processing = await call(w.key, `${R}/${rec.recordingId}`);
    expect(processing.status).toBe(200);
    expect(processing.body).toMatchObject({
      id: rec.recordingId,
      sessionId,
      status: 'processing',
      durationSeconds: null,
      sizeBytes: null,
      contentType: 'video/mp4',
      readyAt: null,
      error: null,
    });
    // Retention from the workspace's policy (30 days by default), counted from the start.
    const days = (Date.parse(processing.body.retentionExpiresAt) - Date.parse(processing.body.createdAt)) / 86_400_000;
    expect(days).toBeCloseTo(30, 3);
    const early = await call(w.key, `${R}/${rec.recordingId}/access`);
    expect(early).toMatchObject({ status: 409, body: { code: 'recording_not_ready', retryable: true } });

    const put = await t.services.storage.put(rec.storageKey, MP4, { contentType: 'video/mp4' });
    await f.recordings.ready(rec.recordingId, { durationSeconds: 1.04, sizeBytes: put.size });
    const ready = await call(w.key, `${R}/${rec.recordingId}`);
    expect(ready.body).toMatchObject({ status: 'ready', durationSeconds: 1.04, sizeBytes: MP4.length });
    expect(ready.body.readyAt).toEqual(expect.any(String));

    const before = Date.now();
    const access = await call<{ url: string; expiresAt: string }>(w.key, `${R}/${rec.recordingId}/access`);
    expect(access.status).toBe(200);
    const expiresAt = Date.parse(access.body.expiresAt);
    expect(expiresAt).toBeGreaterThan(before + 3_500_000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 3_600_000);
    const whole = await fetchMedia(access.body.url);
    expect(whole.status).toBe(200);
    expect(Buffer.from(await whole.arrayBuffer()).equals(MP4)).toBe(true);
    const part = await fetchMedia(access.body.url, { range: 'bytes=100-199' });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 100-199/${MP4.length}`);
    expect(Buffer.from(await part.arrayBuffer()).equals(MP4.subarray(100, 200))).toBe(true);
    // A tampered URL is refused; asking again gives a fresh one.
    expect((await fetchMedia(withTamperedSignature(access.body.url))).status).toBe(403);
    const renewed = await call<{ url: string; expiresAt: string }>(w.key, `${R}/${rec.recordingId}/access`);
    expect(renewed.status).toBe(200);
    expect(Date.parse(renewed.body.expiresAt)).toBeGreaterThanOrEqual(expiresAt);
  });

  it('security: a playback URL never outlives retention; past retention access is 404 recording_expired, even before the media is deleted', async () => {
    const w = await workspace();
    const { recordingId } = await f.readyRecording(await f.liveSession(w.tenantId, w.apiKeyId), MP4);
    await t.services
      .sql`update recordings set retention_expires_at = now() + interval '10 minutes' where id = ${recordingId}`;
    const access = await call<{ expiresAt: string }>(w.key, `${R}/${recordingId}/access`);
    expect(Date.parse(access.body.expiresAt)).toBeLessThanOrEqual(Date.now() + 600_000);
    expect(Date.parse(access.body.expiresAt)).toBeGreaterThan(Date.now() + 590_000);
    await t.services
      .sql`update recordings set retention_expires_at = now() - interval '1 second' where id = ${recordingId}`;
    expect(await call(w.key, `${R}/${recordingId}/access`)).toMatchObject({
      status: 404,
      body: { code: 'recording_expired' },
    });
  });

  it("happy: retention follows the workspace's limit when recording begins; recordings made before keep theirs", async () => {
    const w = await workspace();
    const before = await f.recordings.begin(await f.liveSession(w.tenantId, w.apiKeyId));
    await t.services.tenants.setLimits(w.tenantId, { recordingRetentionDays: 7 });
    const after = await f.recordings.begin(await f.liveSession(w.tenantId, w.apiKeyId));
    const days = async (id: string) => {
      const r = (await call(w.key, `${R}/${id}`)).body;
      return (Date.parse(r.retentionExpiresAt) - Date.parse(r.createdAt)) / 86_400_000;
    };
    expect(await days(before.recordingId)).toBeCloseTo(30, 3);
    expect(await days(after.recordingId)).toBeCloseTo(7, 3);
  });

  it('error: a failed recording reads failed with its reason; access is 409 recording_failed', async () => {
    const w = await workspace();
    const rec = await f.recordings.begin(await f.liveSession(w.tenantId, w.apiKeyId));
    await f.recordings.failed(rec.recordingId, 'encoder crashed');
    expect((await call(w.key, `${R}/${rec.recordingId}`)).body).toMatchObject({
      status: 'failed',
      error: 'encoder crashed',
    });
    expect(await call(w.key, `${R}/${rec.recordingId}/access`)).toMatchObject({
      status: 409,
      body: { code: 'recording_failed', retryable: false },
    });
  });

  it('happy: lists newest first with keyset paging and a session filter; bad queries are 422 naming the parameter', async () => {
    const w = await workspace();
    const s1 = await f.liveSession(w.tenantId, w.apiKeyId);
    const s2 = await f.liveSession(w.tenantId, w.apiKeyId);
    const ids: string[] = [];
    for (const s of [s1, s2, s1, s2, s1]) ids.push((await f.recordings.begin(s)).recordingId);
    // Another workspace's recordings never show.
    const other = await workspace();
    await f.recordings.begin(await f.liveSession(other.tenantId, other.apiKeyId));

    const seen: string[] = [];
    let url = `${R}?limit=2`;
    for (let page = 0; page < 5; page++) {
      const r = await call<{ data: RecordingBody[]; nextCursor: string | null }>(w.key, url);
      expect(r.status).toBe(200);
      seen.push(...r.body.data.map((d) => d.id));
      if (!r.body.nextCursor) break;
      url = `${R}?limit=2&cursor=${encodeURIComponent(r.body.nextCursor)}`;
    }
    const expected = (
      await t.services.sql<
        { id: string }[]
      >`select id from recordings where tenant_id = ${w.tenantId} order by created_at desc, id desc`
    ).map((r) => r.id);
    expect(seen).toEqual(expected);
    expect([...seen].sort()).toEqual([...ids].sort());
    const only = await call<{ data: RecordingBody[]; nextCursor: string | null }>(w.key, `${R}?sessionId=${s2}`);
    expect(only.body.data.map((d) => d.sessionId)).toEqual([s2, s2]);
    expect(only.body.nextCursor).toBeNull();
    expect((await call<{ data: unknown[] }>(other.key, `${R}?sessionId=${s1}`)).body.data).toEqual([]);

    for (const [q, field] of [
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['cursor=bm9wZQ', 'cursor'],
      ['sessionid=x', 'sessionid'],
      ['limit=abc', 'limit'],
    ] as const) {
      const r = await call(w.key, `${R}?${q}`);
      expect(r.status, q).toBe(422);
      expect(r.body.field, q).toBe(field);
    }
  });

  it("security: another workspace's recording, an unknown id and a malformed one are 404 on read and access; the scope is recordings:read", async () => {
    const w = await workspace();
    const { recordingId } = await f.readyRecording(await f.liveSession(w.tenantId, w.apiKeyId), MP4);
    const other = await workspace();
    for (const id of [recordingId, 'rec_doesnotexist', 'nope', 'rec_a.b']) {
      expect((await call(other.key, `${R}/${id}`)).status, id).toBe(404);
      expect((await call(other.key, `${R}/${id}/access`)).status, id).toBe(404);
    }
    const narrow = await workspace(['realtime:write']);
    expect(await call(narrow.key, R)).toMatchObject({ status: 403, body: { requiredScope: 'recordings:read' } });
    const reader = await t.newTenant({ credits: 60, scopes: ['recordings:read'] });
    expect((await call(reader.apiKey, R)).status).toBe(200);
  });

  it('happy: retention sweep: media past retention is deleted (metadata stays); a recording left processing long after its call ended fails with a reason', async () => {
    const w = await workspace();
    const old = await f.readyRecording(await f.liveSession(w.tenantId, w.apiKeyId), MP4);
    const kept = await f.readyRecording(await f.liveSession(w.tenantId, w.apiKeyId), MP4);
    await t.services
      .sql`update recordings set retention_expires_at = now() - interval '1 hour' where id = ${old.recordingId}`;

    // Calls whose worker never finalised the recording: one ended 2 hours ago, one a minute ago, one still running.
    const abandoned = [];
    for (const endedAgoMs of [2 * 3_600_000, 60_000, null]) {
      const sessionId = await f.liveSession(w.tenantId, w.apiKeyId);
      const rec = await f.recordings.begin(sessionId);
      await t.services.storage.put(rec.storageKey, MP4.subarray(0, 500), { contentType: 'video/mp4' });
      if (endedAgoMs !== null) await f.sessions.end(sessionId, 'disconnected', new Date(Date.now() - endedAgoMs));
      abandoned.push(rec);
    }

    // (Other tests' due recordings are swept too: the counts are at least ours.)
    const pass = await t.services.recordings.sweep();
    expect(pass.deleted).toBeGreaterThanOrEqual(1);
    expect(pass.abandoned).toBeGreaterThanOrEqual(1);
    expect(await t.services.storage.stat(old.storageKey)).toBeUndefined();
    expect(await t.services.storage.stat(kept.storageKey)).toBeDefined();
    const [row] = await t.services.sql<
      { media_deleted_at: Date | null }[]
    >`select media_deleted_at from recordings where id = ${old.recordingId}`;
    expect(row!.media_deleted_at).toBeInstanceOf(Date);
    expect((await call(w.key, `${R}/${old.recordingId}`)).body).toMatchObject({ status: 'ready', id: old.recordingId });
    expect((await call(w.key, `${R}/${old.recordingId}/access`)).body.code).toBe('recording_expired');

    const [stale, recent, running] = abandoned;
    const staleBody = (await call(w.key, `${R}/${stale!.recordingId}`)).body;
    expect(staleBody.status).toBe('failed');
    expect(staleBody.error).toMatch(
      /^The recording was never finalised: its call ended at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ and the worker stopped before finishing the file$/,
    );
    expect(await t.services.storage.stat(stale!.storageKey)).toBeUndefined();
    for (const r of [recent!, running!])
      expect((await call(w.key, `${R}/${r.recordingId}`)).body.status).toBe('processing');
    // Nothing left to do: a second pass changes nothing.
    expect(await t.services.recordings.sweep()).toEqual({ deleted: 0, abandoned: 0 });
  });

  it('happy: the retention job runs durably and periodically in the job workers: one per interval whatever the number of processes', async () => {
    const w = await workspace();
    const due = await f.readyRecording(await f.liveSession(w.tenantId, w.apiKeyId), MP4);
    await t.services
      .sql`update recordings set retention_expires_at = now() - interval '1 minute' where id = ${due.recordingId}`;
    const workers = await startJobWorkers(t.services, { concurrency: 1 });
    try {
      // The sweep deletes the media, then marks the row: wait for the mark, the last of the two.
      const deletedAt = await waitFor('the retention job to mark the media deleted', async () => {
        const [row] = await t.services.sql<
          { media_deleted_at: Date | null }[]
        >`select media_deleted_at from recordings where id = ${due.recordingId}`;
        return row!.media_deleted_at ?? undefined;
      });
      expect(deletedAt).toBeInstanceOf(Date);
      expect(await t.services.storage.stat(due.storageKey)).toBeFalsy();
      // A second process offering the job in the same interval adds none.
      await t.services.jobs.enqueue(
        RECORDING_RETENTION_JOB,
        {},
        { singletonKey: RECORDING_RETENTION_JOB, singletonSeconds: 10 },
      );
      const slots = await t.services.sql<{ n: string; slots: string }[]>`
        select count(*) as n, count(distinct singleton_on) as slots from pgboss.job where name = ${RECORDING_RETENTION_JOB}`;
      expect(Number(slots[0]!.n)).toBe(Number(slots[0]!.slots));
    } finally {
      await workers.stop({ timeoutMs: 5_000 });
    }
  });
});
