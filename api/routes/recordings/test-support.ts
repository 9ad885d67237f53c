import { LiveSessionStore } from '../../../core/live/sessions.ts';
import { RecordingStore } from '../../../core/recordings/store.ts';
import type { TestApi } from '../../../test/helpers.ts';

/**
 * Live calls and their recordings as the agent worker leaves them, made through the same stores it
 * uses (UsageStore.open for the session's usage row, LiveSessionStore to start and end it,
 * RecordingStore for the recording), for the recordings API's tests.
 */
export function recordingFixtures(t: TestApi) {
  const sessions = new LiveSessionStore(t.services.sql, t.services.usage);
  const recordings = new RecordingStore(t.services.sql);

  /** A live call of the tenant (a draft avatar, conversation mode, recording on), pending. */
  async function liveSession(tenantId: string, apiKeyId: string): Promise<string> {
    const [avatar] = await t.services.sql<{ id: string }[]>`
      insert into avatars (id, tenant_id, display_name, model_id, status) values (${`ava_${crypto.randomUUID().replace(/-/g, '')}`}, ${tenantId}, 'Rec', 'builtin', 'draft')
      returning id`;
    const { sessionId } = await t.services.usage.open({
      tenantId,
      apiKeyId,
      kind: 'live',
      avatarId: avatar!.id,
      reserveCreditMicros: 1_000_000,
      ttlSeconds: 3600,
    });
    await t.services.sql`
      insert into live_sessions (id, tenant_id, api_key_id, avatar_id, capacity_pool, mode, room_name, user_identity, avatar_identity, agent_identity, record, max_duration_seconds, state)
      values (${sessionId}, ${tenantId}, ${apiKeyId}, ${avatar!.id}, 'primary', 'conversation', ${`avatar-${sessionId}`}, ${`user-${sessionId}`},
              ${`avatar-${sessionId}`}, ${`agent-${sessionId}`}, true, 600, 'pending')`;
    return sessionId;
  }

  /** A recording that finished: its MP4 in storage (`bytes`), the row ready. */
  async function readyRecording(
    sessionId: string,
    bytes: Buffer,
    durationSeconds = 2,
  ): Promise<{ recordingId: string; storageKey: string }> {
    const rec = await recordings.begin(sessionId);
    const put = await t.services.storage.put(rec.storageKey, bytes, { contentType: 'video/mp4' });
    await recordings.ready(rec.recordingId, { durationSeconds, sizeBytes: put.size });
    return rec;
  }

  return { sessions, recordings, liveSession, readyRecording };
}
