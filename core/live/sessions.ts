/**
 * Live calls in the database: the session row every process agrees on (the API that minted it, the
 * worker that runs it, the janitor that cleans up after a dead worker). Its life:
 *
 *   pending ──(the worker's avatar joined)──▶ connecting ──(the user is there too)──▶ active
 *      └────────────────────────┴──────────────────────────────────┴──▶ ended (exactly once)
 *
 * Ending settles the session's usage in the same transaction: billed from the start (both present)
 * to the end, never above the reservation; a call that never started is `failed` and bills nothing.
 * A trigger then notifies every API process (`live_session_ended`), which frees the call's slot.
 */
import type { Sql, Tx } from '../platform/db/index.ts';
import type { UsageStore } from '../usage.ts';

type LiveSessionState = 'pending' | 'connecting' | 'active' | 'ended';
export type LiveSessionMode = 'conversation' | 'provider';

export interface LiveSession {
  id: string;
  tenantId: string;
  apiKeyId: string | null;
  avatarId: string;
  capacityPool: string;
  mode: LiveSessionMode;
  roomName: string;
  userIdentity: string | null;
  avatarIdentity: string;
  agentIdentity: string | null;
  sceneId: string | null;
  videoCacheId: string | null;
  record: boolean;
  maxDurationSeconds: number;
  state: LiveSessionState;
  endReason: string | null;
  workerId: string | null;
  createdAt: Date;
  joinedAt: Date | null;
  startedAt: Date | null;
  endedAt: Date | null;
  lastHeartbeatAt: Date | null;
}

interface LiveSessionRow {
  id: string;
  tenant_id: string;
  api_key_id: string | null;
  avatar_id: string;
  capacity_pool: string;
  mode: LiveSessionMode;
  room_name: string;
  user_identity: string | null;
  avatar_identity: string;
  agent_identity: string | null;
  scene_id: string | null;
  video_cache_id: string | null;
  record: boolean;
  max_duration_seconds: number;
  state: LiveSessionState;
  end_reason: string | null;
  worker_id: string | null;
  created_at: Date;
  joined_at: Date | null;
  started_at: Date | null;
  ended_at: Date | null;
  last_heartbeat_at: Date | null;
}

const toLiveSession = (r: LiveSessionRow): LiveSession => ({
  id: r.id,
  tenantId: r.tenant_id,
  apiKeyId: r.api_key_id,
  avatarId: r.avatar_id,
  capacityPool: r.capacity_pool,
  mode: r.mode,
  roomName: r.room_name,
  userIdentity: r.user_identity,
  avatarIdentity: r.avatar_identity,
  agentIdentity: r.agent_identity,
  sceneId: r.scene_id,
  videoCacheId: r.video_cache_id,
  record: r.record,
  maxDurationSeconds: r.max_duration_seconds,
  state: r.state,
  endReason: r.end_reason,
  workerId: r.worker_id,
  createdAt: r.created_at,
  joinedAt: r.joined_at,
  startedAt: r.started_at,
  endedAt: r.ended_at,
  lastHeartbeatAt: r.last_heartbeat_at,
});

/** A participant observation (connection history). */
export interface ConnectionEventInput {
  participantIdentity: string;
  role: 'user' | 'avatar' | 'agent' | 'other';
  kind: 'joined' | 'left' | 'reconnected' | 'track_published' | 'track_unpublished';
  trackKind?: 'audio' | 'video' | null;
  trackSource?: string | null;
  occurredAt: Date;
  source: 'webhook' | 'worker';
  /** Webhook event id: a redelivered event is recorded once. */
  eventId?: string | null;
}

export interface EndedSession {
  session: LiveSession;
  /** False when it had already ended (nothing changed). */
  endedNow: boolean;
}

export class LiveSessionStore {
  constructor(
    private readonly sql: Sql,
    private readonly usage: UsageStore,
  ) {}

  async get(id: string): Promise<LiveSession | undefined> {
    const [row] = await this.sql<LiveSessionRow[]>`select * from live_sessions where id = ${id}`;
    return row && toLiveSession(row);
  }

  /** The worker takes a dispatched call: only a pending one no other worker took. Undefined otherwise (ended, unknown, taken). */
  async claim(id: string, workerId: string): Promise<LiveSession | undefined> {
    const [row] = await this.sql<LiveSessionRow[]>`
      update live_sessions set worker_id = ${workerId}, last_heartbeat_at = now(), updated_at = now()
      where id = ${id} and state = 'pending' and (worker_id is null or worker_id = ${workerId})
      returning *`;
    return row && toLiveSession(row);
  }

  /** The avatar is in the room. */
  async joined(id: string): Promise<void> {
    await this.sql`
      update live_sessions set state = 'connecting', joined_at = coalesce(joined_at, now()), last_heartbeat_at = now(), updated_at = now()
      where id = ${id} and state = 'pending'`;
  }

  /** The avatar and the user are both present: billing runs from `at`. */
  async started(id: string, at: Date): Promise<void> {
    const rows = await this.sql`
      update live_sessions set state = 'active', started_at = ${at}, last_heartbeat_at = now(), updated_at = now()
      where id = ${id} and state in ('pending', 'connecting')`;
    if (rows.count > 0) await this.usage.start(id);
  }

  /** The worker is alive; answers whether the call ended meanwhile (released through the API, or by the janitor). */
  async heartbeat(id: string): Promise<{ ended: boolean }> {
    const [row] = await this.sql<{ state: LiveSessionState }[]>`
      update live_sessions set last_heartbeat_at = now(), updated_at = now() where id = ${id} returning state`;
    return { ended: !row || row.state === 'ended' };
  }

  /** Records a connection observation, when the workspace collects connection history. */
  async observe(id: string, e: ConnectionEventInput): Promise<void> {
    await this.sql`
      insert into connection_events (tenant_id, session_id, participant_identity, role, kind, track_kind, track_source, source, event_id, occurred_at)
      select s.tenant_id, s.id, ${e.participantIdentity}, ${e.role}, ${e.kind}, ${e.trackKind ?? null}, ${e.trackSource ?? null}, ${e.source}, ${e.eventId ?? null}, ${e.occurredAt}
      from live_sessions s join tenants t on t.id = s.tenant_id
      where s.id = ${id} and t.connection_history_enabled
      on conflict (event_id) do nothing`;
  }

  /**
   * Ends the call exactly once and settles its usage in the same transaction: `released` with the
   * time from start to `at` (capped by the reservation) if it started, `failed` (0 billed) if not.
   * Whoever ends it (release, webhook, worker, janitor), only the first call changes anything.
   */
  async end(id: string, reason: string, at: Date = new Date()): Promise<EndedSession | undefined> {
    return this.sql.begin(async (tx) => {
      const [row] = await tx<LiveSessionRow[]>`select * from live_sessions where id = ${id} for update`;
      if (!row) return undefined;
      if (row.state === 'ended') return { session: toLiveSession(row), endedNow: false };
      const endAt = row.started_at && at < row.started_at ? row.started_at : at;
      const [ended] = await tx<LiveSessionRow[]>`
        update live_sessions set state = 'ended', end_reason = ${reason}, ended_at = ${endAt}, updated_at = now()
        where id = ${id} returning *`;
      const billableMs = row.started_at ? endAt.getTime() - row.started_at.getTime() : 0;
      await this.usage.finish(
        id,
        row.started_at ? { status: 'released', billableMs } : { status: 'failed', billableMs: 0 },
        tx,
      );
      return { session: toLiveSession(ended!), endedNow: true };
    }) as Promise<EndedSession | undefined>;
  }
}

/** A connection observation as the API answers it (GET /sessions/{id}/connection-history). */
export interface ConnectionEvent {
  participantIdentity: string;
  role: ConnectionEventInput['role'];
  kind: ConnectionEventInput['kind'];
  trackKind: 'audio' | 'video' | null;
  trackSource: string | null;
  occurredAt: string;
  source: ConnectionEventInput['source'];
}

/** At most this many observations are answered per session (the oldest first). */
const CONNECTION_HISTORY_LIMIT = 1000;

/** Live sessions of a tenant, by state (the plan's concurrency limit counts them all). */
export interface LiveCounts {
  pending: number;
  connecting: number;
  active: number;
  /** Of those, the calls playing a scene. */
  scene: number;
}

/** Read in a transaction holding the tenant's lock, so that concurrent mints see each other. */
export async function liveCounts(tx: Sql | Tx, tenantId: string): Promise<LiveCounts> {
  const rows = await tx<{ state: LiveSessionState; n: number; scene: number }[]>`
    select state, count(*)::int as n, count(scene_id)::int as scene from live_sessions
    where tenant_id = ${tenantId} and state <> 'ended' group by state`;
  const counts: LiveCounts = { pending: 0, connecting: 0, active: 0, scene: 0 };
  for (const r of rows) {
    if (r.state !== 'ended') counts[r.state] = r.n;
    counts.scene += r.scene;
  }
  return counts;
}

/** How often a worker heartbeats each of its calls: six times within the janitor's timeout (LIVE_HEARTBEAT_TIMEOUT_SECONDS). */
export function heartbeatIntervalMs(timeoutSeconds: number): number {
  return (timeoutSeconds * 1000) / 6;
}

/** Ends the calls the janitor finds abandoned; each through `end`, so each is settled once. */
export interface StaleSessionRules {
  /** A joined call (connecting, active) whose worker was not heard from this long: `worker_lost`, billed up to its last heartbeat. */
  heartbeatTimeoutSeconds: number;
  /** A pending call whose avatar did not join this long after the mint: `failed`, billed nothing. */
  joinTimeoutSeconds: number;
  /** An active call this long past started_at + max_duration_seconds: `max_duration`, billed exactly its maximum. */
  maxDurationGraceSeconds: number;
}

/** The calls a pass ended, as they ended. */
export interface StaleSessionsEnded {
  overdue: LiveSession[];
  lost: LiveSession[];
  unjoined: LiveSession[];
}

export async function endStaleSessions(
  store: LiveSessionStore,
  sql: Sql,
  rules: StaleSessionRules,
): Promise<StaleSessionsEnded> {
  const out: StaleSessionsEnded = { overdue: [], lost: [], unjoined: [] };
  const overdue = await sql<{ id: string; due: Date }[]>`
    select id, started_at + make_interval(secs => max_duration_seconds) as due from live_sessions
    where state = 'active' and started_at + make_interval(secs => max_duration_seconds + ${rules.maxDurationGraceSeconds}) < now()`;
  for (const s of overdue) await endInto(out.overdue, store.end(s.id, 'max_duration', s.due));
  const lost = await sql<{ id: string; last: Date }[]>`
    select id, coalesce(last_heartbeat_at, joined_at, created_at) as last from live_sessions
    where state in ('connecting', 'active')
      and coalesce(last_heartbeat_at, joined_at, created_at) < now() - make_interval(secs => ${rules.heartbeatTimeoutSeconds})`;
  for (const s of lost) await endInto(out.lost, store.end(s.id, 'worker_lost', s.last));
  const unjoined = await sql<{ id: string }[]>`
    select id from live_sessions where state = 'pending' and created_at < now() - make_interval(secs => ${rules.joinTimeoutSeconds})`;
  for (const s of unjoined) await endInto(out.unjoined, store.end(s.id, 'failed'));
  return out;
}

/** Adds the session to `list` when this end was the one that ended it. */
async function endInto(list: LiveSession[], ending: Promise<EndedSession | undefined>): Promise<void> {
  const ended = await ending;
  if (ended?.endedNow) list.push(ended.session);
}

interface ConnectionEventRow {
  participant_identity: string;
  role: ConnectionEventInput['role'];
  kind: ConnectionEventInput['kind'];
  track_kind: 'audio' | 'video' | null;
  track_source: string | null;
  occurred_at: Date;
  source: ConnectionEventInput['source'];
}

/** A live session of the tenant (undefined for another tenant's, or an id that is no live call). */
export async function tenantSession(sql: Sql, tenantId: string, id: string): Promise<LiveSession | undefined> {
  const [row] = await sql<LiveSessionRow[]>`select * from live_sessions where id = ${id} and tenant_id = ${tenantId}`;
  return row && toLiveSession(row);
}

/** The observations of a session, oldest first (at most CONNECTION_HISTORY_LIMIT). */
export async function connectionHistory(sql: Sql, tenantId: string, sessionId: string): Promise<ConnectionEvent[]> {
  const rows = await sql<ConnectionEventRow[]>`
    select participant_identity, role, kind, track_kind, track_source, occurred_at, source from connection_events
    where tenant_id = ${tenantId} and session_id = ${sessionId}
    order by occurred_at, id limit ${CONNECTION_HISTORY_LIMIT}`;
  return rows.map((r) => ({
    participantIdentity: r.participant_identity,
    role: r.role,
    kind: r.kind,
    trackKind: r.track_kind,
    trackSource: r.track_source,
    occurredAt: r.occurred_at.toISOString(),
    source: r.source,
  }));
}

/**
 * The session a LiveKit room belongs to: the latest one in that room (a conversation room is one
 * call's own; a provider's room can host one call after another, and its events go to the last).
 */
export async function sessionOfRoom(sql: Sql, roomName: string): Promise<LiveSession | undefined> {
  const [row] = await sql<LiveSessionRow[]>`
    select * from live_sessions where room_name = ${roomName} order by created_at desc limit 1`;
  return row && toLiveSession(row);
}

/** Who a participant is in a call, by identity. */
export function participantRole(s: LiveSession, identity: string): ConnectionEventInput['role'] {
  if (s.userIdentity && identity === s.userIdentity) return 'user';
  if (identity === s.avatarIdentity) return 'avatar';
  if (s.agentIdentity && identity === s.agentIdentity) return 'agent';
  return 'other';
}
