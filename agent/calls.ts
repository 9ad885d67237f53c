/**
 * One dispatched call, worker side: its spec read from the database, its lifecycle and recording
 * written back there (core/live, core/recordings), and its avatar run on the worker's host until
 * it ends. A call that cannot start ends `failed`, so the API never waits on it.
 */
import { loadAvatarPlayback } from '../core/avatars/playback.ts';
import type { Sql } from '../core/platform/db/index.ts';
import type { LiveSession, LiveSessionStore } from '../core/live/sessions.ts';
import type { Logger } from '../core/platform/log.ts';
import type { RecordingStore } from '../core/recordings/store.ts';
import { loadSceneMedia } from '../core/scenes/media.ts';
import type { CallRecordingSink, CallReporter, CallSpec } from './avatar/call.ts';
import type { AvatarHost } from './avatar/host.ts';

/** Where a call's lifecycle and recording go: the stores of core. */
export interface CallStores {
  sql: Sql;
  live: LiveSessionStore;
  recordings: RecordingStore;
}

/** The avatar's view of a claimed session: what it plays (the avatar's clips, or a scene) and whom it meets. */
async function callSpec(sql: Sql, s: LiveSession): Promise<CallSpec> {
  const playback = await loadAvatarPlayback(sql, s.tenantId, s.avatarId);
  if (!playback) throw new Error(`Avatar ${s.avatarId} of session ${s.id} is gone`);
  const base = {
    sessionId: s.id,
    tenantId: s.tenantId,
    mode: s.mode,
    roomName: s.roomName,
    avatarIdentity: s.avatarIdentity,
    avatarName: playback.displayName,
    agentIdentity: s.agentIdentity ?? `agent-${s.id}`,
    userIdentity: s.mode === 'conversation' ? s.userIdentity : null,
    maxDurationSeconds: s.maxDurationSeconds,
    record: s.record,
    ownsRoom: s.mode === 'conversation',
  };
  if (s.videoCacheId) {
    const scene = await loadSceneMedia(sql, s.tenantId, s.videoCacheId);
    if (!scene) throw new Error(`Scene ${s.videoCacheId} of session ${s.id} is not ready`);
    return { ...base, body: { kind: 'scene', cacheKey: scene.cacheKey, continuation: scene.continuation } };
  }
  return { ...base, body: { kind: 'avatar', playback } };
}

function callReporter(live: LiveSessionStore, sessionId: string): CallReporter {
  return {
    joined: () => live.joined(sessionId),
    started: (at) => live.started(sessionId, at),
    heartbeat: () => live.heartbeat(sessionId),
    observe: (o) => live.observe(sessionId, { ...o, occurredAt: o.at, source: 'worker' }),
    ended: async (reason, at) => {
      await live.end(sessionId, reason, at);
    },
  };
}

function recordingSink(recordings: RecordingStore, sessionId: string): CallRecordingSink {
  return {
    begin: () => recordings.begin(sessionId),
    ready: (recordingId, info) => recordings.ready(recordingId, info),
    failed: (recordingId, reason) => recordings.failed(recordingId, reason),
  };
}

/** Runs a claimed call's avatar until the call ends; a call that could not start is settled as failed. */
export async function runCall(stores: CallStores, host: AvatarHost, s: LiveSession, log: Logger): Promise<void> {
  const clog = log.child({ sessionId: s.id });
  try {
    const spec = await callSpec(stores.sql, s);
    const runner = await host.startCall(
      spec,
      callReporter(stores.live, s.id),
      s.record ? recordingSink(stores.recordings, s.id) : null,
    );
    clog.info({ reason: await runner.ended }, 'call ended');
  } catch (err) {
    clog.error({ err }, 'call failed');
    await stores.live
      .end(s.id, 'failed')
      .catch((e: unknown) => clog.error({ err: e }, 'could not settle the failed call'));
  }
}
