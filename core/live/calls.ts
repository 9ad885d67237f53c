/**
 * The API side of live calls: mint (a capacity slot, a credit reservation, the session row, the
 * LiveKit room, the agent's dispatch and the user's token), release, LiveKit webhooks, and the
 * janitor's sweep. Everything a call's end does goes through LiveSessionStore.end (exactly once,
 * settled in the same transaction); the slot follows through the `live_session_ended` notify.
 *
 * Consistency of a mint under concurrency:
 * - Per tenant, mints serialise on the tenant's wallet row (locked first, as every credit
 *   operation does): the plan's concurrency count, the scene-call count and the credits a mint
 *   reads cannot be raced by another mint of the same tenant.
 * - The slot is taken atomically in the coordinator, inside that transaction; if anything after
 *   it fails (the reservation, the rows, the commit), the slot is released before the error is
 *   answered. A process killed in between leaves a slot without a session: the janitor frees it.
 * - Room creation and dispatch come after the commit; when either fails, the session ends `failed`
 *   (reservation released, nothing billed) and its slot is freed: 503 session_dispatch_failed.
 */
import { assertIdlePoolPlayable, ClipLibraryNotReady, IdlePoolExhausted } from '../../clips/behavior/index.ts';
import { loadAvatarPlayback } from '../avatars/playback.ts';
import type { Config } from '../platform/config.ts';
import { MICROS_PER_SECOND, spendLimitError, spendRoom } from '../credits/ledger.ts';
import type { Sql, Tx } from '../platform/db/index.ts';
import { sceneForMint } from '../scenes/media.ts';
import { ApiError, notFound } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import type { Logger } from '../platform/log.ts';
import type { UsageStore } from '../usage.ts';
import type { LiveCapacity, PoolSlots } from './capacity.ts';
import { issueJoinToken, purgeExpiredJoinTokens, redeemJoinToken } from './join.ts';
import type { LiveKit } from './livekit.ts';
import {
  endStaleSessions,
  liveCounts,
  participantRole,
  sessionOfRoom,
  tenantSession,
  type ConnectionEventInput,
  type LiveSession,
  type LiveSessionMode,
  type LiveSessionStore,
  type StaleSessionsEnded,
} from './sessions.ts';

/** The janitor ends an active call this long after its maximum duration, should its worker not have. */
const MAX_DURATION_GRACE_SECONDS = 30;
/** A conversation room closes this long after its last participant left. */
const ROOM_DEPARTURE_TIMEOUT_SECONDS = 10;
/** A conversation room: the user, the avatar, the voice agent, and one spare (a reconnecting client). */
const ROOM_MAX_PARTICIPANTS = 4;
/** Extra life of a call's credit reservation past its longest possible run: the janitor ends calls long before. */
const RESERVATION_SLACK_SECONDS = 3600;

/** Why a call may be released: the client's closed set. */
export const RELEASE_REASONS = [
  'page_hide',
  'disconnected',
  'superseded',
  'unmount',
  'manual',
  'idle_timeout',
] as const;
type ReleaseReason = (typeof RELEASE_REASONS)[number];
/** The end reason recorded for a release that gave none. */
const DEFAULT_RELEASE_REASON = 'released';

export interface Caller {
  tenantId: string;
  apiKeyId: string;
  spendLimitCreditMicros: number | null;
  /**
   * Set when a signed-in dashboard page mints: its grant goes to the platform's own page (same
   * origin, anti-forgery checked), so the workspace's allowed origins do not apply to it.
   */
  dashboardSessionId?: string;
}

export interface MintInput {
  avatarId: string;
  capacityPool: string;
  endUserId?: string;
  videoCacheId?: string;
  queueTicketId?: string;
  /** Already bounded by LIVE_MAX_DURATION_SECONDS (the route checks). */
  maxDurationSeconds: number;
  record?: boolean;
  /** Provider mode: the avatar joins this existing room and speaks for this agent. */
  room?: { name: string; agentIdentity: string };
}

/** A release: one of a call and a queue ticket. */
export interface ReleaseInput {
  sessionId?: string;
  ticketId?: string;
  reason?: ReleaseReason;
}

export interface Grant {
  sessionId: string;
  roomName: string;
  serverUrl: string;
  /**
   * Null in provider mode (the caller's own agent and users are in the room already), and when the
   * workspace limits its calls to allowed origins: the page redeems `joinToken` for it instead.
   */
  participantToken: string | null;
  /** Single use, expiring with the grant: set instead of `participantToken` for an origin-limited workspace. */
  joinToken?: string;
  participantIdentity: string | null;
  avatarIdentity: string;
  capacityPool: string;
  expiresAt: string;
  maxDurationSeconds: number;
}

/** What a redeemed join token answers: what a page joins the call with. */
export interface JoinGrant {
  sessionId: string;
  serverUrl: string;
  participantToken: string;
  avatarIdentity: string;
}

/** Where a mint's time went (the Server-Timing header; the mint benchmark reads it). */
export interface MintTiming {
  /** Our own work: checks, locks, slot, reservation, rows, token. */
  ownMs: number;
  roomMs: number;
  dispatchMs: number;
}

export type ReleaseOutcome =
  | {
      kind: 'session';
      sessionId: string;
      capacityPool: string;
      endReason: string;
      endedAt: string;
      status: 'released' | 'failed' | 'reserved' | 'started';
      billedCreditMicros: number;
    }
  | { kind: 'ticket'; ticketId: string; capacityPool: string };

/** A call's names, fixed before anything is checked: its session id, room and participants. */
interface PlannedCall {
  sessionId: string;
  mode: LiveSessionMode;
  roomName: string;
  identities: { user: string | null; avatar: string; agent: string };
}

function plannedCall(input: MintInput): PlannedCall {
  const sessionId = newId('session');
  const mode: LiveSessionMode = input.room ? 'provider' : 'conversation';
  return {
    sessionId,
    mode,
    roomName: input.room?.name ?? `avatar-${sessionId}`,
    identities: {
      user: mode === 'conversation' ? `user-${sessionId}` : null,
      avatar: `avatar-${sessionId}`,
      agent: input.room?.agentIdentity ?? `agent-${sessionId}`,
    },
  };
}

/** What the policy checks allow a call. */
interface Allowed {
  sceneId: string | null;
  record: boolean;
  seconds: number;
  originLimited: boolean;
}

/** An admitted call: allowed, with the pool whose slot it holds, and its join token when the workspace limits origins. */
interface Admitted extends Allowed {
  pool: string;
  joinToken?: string;
}

interface TenantPolicy {
  /** Whether the workspace names allowed origins: its user's token is then handed out only by a join. */
  origin_limited: boolean;
  scene_sessions_enabled: boolean;
  recordings_enabled: boolean;
  max_concurrent_sessions: number;
  max_concurrent_scene_sessions: number;
}

/** How long to wait before sending a ticket back: longer further back, always well within the ticket's life. */
function recommendedRetryMs(position: number, ticketTtlSeconds: number): number {
  return Math.min(1000 + 250 * (position - 1), Math.floor((ticketTtlSeconds * 1000) / 3));
}

/** How long a dispatched call waits for a worker to take it before it is dispatched again: longer than a worker takes to claim one (tens of ms; seconds on a loaded machine). */
const REDISPATCH_AFTER_MS = 4000;

/** The refusal of a live call on a server without LiveKit. */
const noLiveKit = () =>
  new ApiError(
    'capacity_unavailable',
    'Live calls are not available: this server has no LiveKit configured (LIVEKIT_URL)',
  );

export class LiveCalls {
  constructor(
    private readonly d: {
      sql: Sql;
      config: Config;
      log: Logger;
      usage: UsageStore;
      sessions: LiveSessionStore;
      capacity: LiveCapacity;
      livekit: LiveKit | undefined;
    },
  ) {}

  /** Mints a call; refusals in order: avatar, scene, recording policy, idle pool, credits, plan concurrency, capacity. */
  async mint(caller: Caller, input: MintInput): Promise<{ grant: Grant; timing: MintTiming }> {
    const { config, livekit } = this.d;
    const t0 = performance.now();
    const call = plannedCall(input);
    // Read before the transaction: while it holds a database connection, a mint uses no other.
    const pools = await this.d.capacity.pools();
    const admitted = await this.admit(caller, input, call, pools);
    const t1 = performance.now();
    const { roomMs, dispatchMs } = await this.dispatch(call, admitted.pool);
    const t2 = performance.now();
    const token =
      call.identities.user && !admitted.joinToken
        ? await livekit!.userToken(call.roomName, call.identities.user, config.LIVE_TOKEN_TTL_SECONDS)
        : null;
    const ownMs = t1 - t0 + (performance.now() - t2);
    return {
      grant: {
        sessionId: call.sessionId,
        roomName: call.roomName,
        serverUrl: livekit!.serverUrl,
        participantToken: token,
        ...(admitted.joinToken ? { joinToken: admitted.joinToken } : {}),
        participantIdentity: call.identities.user,
        avatarIdentity: call.identities.avatar,
        capacityPool: admitted.pool,
        expiresAt: new Date(Date.now() + config.LIVE_TOKEN_TTL_SECONDS * 1000).toISOString(),
        maxDurationSeconds: admitted.seconds,
      },
      timing: { ownMs, roomMs, dispatchMs },
    };
  }

  /**
   * A mint's transaction, under the tenant's lock: its policy checks, its capacity slot, and its
   * rows. A slot taken is freed again when anything after it fails, before the error is answered.
   */
  private async admit(
    caller: Caller,
    input: MintInput,
    call: PlannedCall,
    pools: Map<string, PoolSlots>,
  ): Promise<Admitted> {
    let granted: string | undefined;
    try {
      return await this.d.sql.begin(async (tx) => {
        const allowed = await this.checkPolicy(tx, caller, input);
        granted = await this.takeSlot(caller, input, call.sessionId, pools);
        const admitted: Admitted = { ...allowed, pool: granted };
        await this.insertCall(tx, caller, input, call, admitted);
        if (allowed.originLimited && call.identities.user && !caller.dashboardSessionId) {
          admitted.joinToken = await issueJoinToken(tx, {
            tenantId: caller.tenantId,
            sessionId: call.sessionId,
            ttlSeconds: this.d.config.LIVE_TOKEN_TTL_SECONDS,
          });
        }
        return admitted;
      });
    } catch (err) {
      if (granted) {
        await this.d.capacity
          .release(granted, call.sessionId)
          .catch((e: unknown) =>
            this.d.log.error({ err: e, sessionId: call.sessionId }, 'could not free the slot of a failed mint'),
          );
      }
      throw err;
    }
  }

  /** What the tenant's policy, the avatar, the scene and the credits allow this call; each refusal an ApiError, in mint's order. */
  private async checkPolicy(tx: Tx, caller: Caller, input: MintInput): Promise<Allowed> {
    // The tenant's lock: its wallet row, taken first by every credit operation too.
    await tx`select 1 from credit_wallets where tenant_id = ${caller.tenantId} for update`;
    const [policy] = await tx<TenantPolicy[]>`
      select scene_sessions_enabled, recordings_enabled, max_concurrent_sessions, max_concurrent_scene_sessions,
             cardinality(allowed_origins) > 0 as origin_limited
      from tenants where id = ${caller.tenantId}`;
    if (!policy) throw notFound('Tenant');

    const playback = await loadAvatarPlayback(tx, caller.tenantId, input.avatarId);
    if (!playback) throw notFound(`Avatar ${input.avatarId.slice(0, 80)}`);
    if (playback.status !== 'ready') {
      throw new ApiError(
        'avatar_state_conflict',
        `Avatar ${input.avatarId} is ${playback.status}, not ready: a call can start once it is ready`,
      );
    }
    const counts = await liveCounts(tx, caller.tenantId);
    const scene = input.videoCacheId
      ? await this.checkScene(tx, caller.tenantId, input.videoCacheId, policy, counts.scene)
      : undefined;
    if (input.record === true && !policy.recordings_enabled) {
      throw new ApiError(
        'recordings_not_enabled',
        'Recording is not enabled for this workspace: omit record (or send false), or ask an operator to enable recordings',
      );
    }
    const record = input.record ?? policy.recordings_enabled;
    if (!scene) checkIdlePool(playback.behavior, playback.availability);
    const seconds = await this.affordableSeconds(tx, caller, input.maxDurationSeconds);
    const live = counts.pending + counts.connecting + counts.active;
    if (live >= policy.max_concurrent_sessions) {
      throw new ApiError(
        'concurrency_limit_reached',
        `The plan's limit of ${policy.max_concurrent_sessions} concurrent sessions is reached (pending and connecting sessions count): end or release a session first`,
        {
          maxConcurrentSessions: policy.max_concurrent_sessions,
          liveSessions: live,
          activeSessions: counts.active,
          connectingSessions: counts.connecting,
          pendingSessions: counts.pending,
        },
      );
    }
    if (!this.d.livekit) throw noLiveKit();
    return { sceneId: scene?.id ?? null, record, seconds, originLimited: policy.origin_limited };
  }

  /** The call's capacity slot (the pool that granted it), or the refusal: unavailable, or queued with a ticket. */
  private async takeSlot(
    caller: Caller,
    input: MintInput,
    sessionId: string,
    pools: Map<string, PoolSlots>,
  ): Promise<string> {
    const decision = await this.d.capacity.acquire(
      { pool: input.capacityPool, holder: sessionId, tenantId: caller.tenantId, ticketId: input.queueTicketId },
      pools,
    );
    if (decision.status === 'unavailable') {
      throw new ApiError(
        'capacity_unavailable',
        'No capacity: no agent worker serves any pool and no pool has configured slots. Retry with backoff',
      );
    }
    if (decision.status === 'queued') {
      const retryMs = recommendedRetryMs(decision.position, this.d.config.QUEUE_TICKET_TTL_SECONDS);
      throw new ApiError(
        'capacity_queued',
        'Capacity is full: queued',
        { queue_ticket_id: decision.ticketId, queue_size: decision.position, recommended_retry_ms: retryMs },
        { 'Retry-After': String(Math.ceil(retryMs / 1000)) },
      );
    }
    return decision.pool;
  }

  /** The call's credit reservation (its session_usage row) and its live_sessions row, pending. */
  private async insertCall(
    tx: Tx,
    caller: Caller,
    input: MintInput,
    call: PlannedCall,
    admitted: Admitted,
  ): Promise<void> {
    const { config } = this.d;
    const { sessionId, mode, roomName, identities } = call;
    await this.d.usage.open(
      {
        sessionId,
        tenantId: caller.tenantId,
        apiKeyId: caller.apiKeyId,
        kind: 'live',
        avatarId: input.avatarId,
        endUserId: input.endUserId ?? null,
        reserveCreditMicros: admitted.seconds * MICROS_PER_SECOND,
        ttlSeconds:
          admitted.seconds +
          config.LIVE_JOIN_TIMEOUT_SECONDS +
          config.USER_JOIN_TIMEOUT_SECONDS +
          RESERVATION_SLACK_SECONDS,
      },
      tx,
    );
    await tx`
      insert into live_sessions (id, tenant_id, api_key_id, avatar_id, capacity_pool, mode, room_name, user_identity, avatar_identity,
                                 agent_identity, scene_id, video_cache_id, record, max_duration_seconds, state)
      values (${sessionId}, ${caller.tenantId}, ${caller.apiKeyId}, ${input.avatarId}, ${admitted.pool}, ${mode}, ${roomName},
              ${identities.user}, ${identities.avatar}, ${identities.agent}, ${admitted.sceneId}, ${admitted.sceneId ? input.videoCacheId! : null},
              ${admitted.record}, ${admitted.seconds}, 'pending')`;
  }

  /**
   * The committed call's room (conversation mode) and its agent's dispatch. When either fails, the
   * call ends `failed` (nothing billed), its slot and room are freed: 503 session_dispatch_failed.
   */
  private async dispatch(call: PlannedCall, pool: string): Promise<{ roomMs: number; dispatchMs: number }> {
    const { config, capacity } = this.d;
    const livekit = this.d.livekit!;
    const { sessionId, mode, roomName } = call;
    const t0 = performance.now();
    try {
      if (mode === 'conversation') {
        await livekit.createRoom(roomName, {
          emptyTimeoutSeconds: config.LIVE_JOIN_TIMEOUT_SECONDS,
          departureTimeoutSeconds: ROOM_DEPARTURE_TIMEOUT_SECONDS,
          maxParticipants: ROOM_MAX_PARTICIPANTS,
        });
      }
      const t1 = performance.now();
      await livekit.dispatchAgent(roomName, sessionId);
      this.dispatchAgainUntilTaken(call);
      return { roomMs: t1 - t0, dispatchMs: performance.now() - t1 };
    } catch (err) {
      this.d.log.error({ err, sessionId, room: roomName }, 'live call dispatch failed');
      await this.d.sessions.end(sessionId, 'dispatch_failed');
      await capacity.release(pool, sessionId);
      if (mode === 'conversation') await livekit.deleteRoom(roomName).catch(() => {});
      throw new ApiError(
        'session_dispatch_failed',
        'The call could not be set up on LiveKit (room or agent dispatch failed); nothing was charged. Retry with backoff',
      );
    }
  }

  /**
   * LiveKit drops a dispatch that finds no worker with room at that moment, and does not try again:
   * a call minted in the seconds after another ended on a full worker (the worker reports its free
   * slot only at its next load report) would wait out LIVE_JOIN_TIMEOUT_SECONDS and fail. So a call
   * no worker has taken after REDISPATCH_AFTER_MS is dispatched again, and again, until one takes
   * it, it ends, or its join deadline passes. A worker takes a session once (a second dispatch that
   * reaches a worker already running it is refused there).
   */
  private dispatchAgainUntilTaken(call: PlannedCall): void {
    const deadline = Date.now() + this.d.config.LIVE_JOIN_TIMEOUT_SECONDS * 1000;
    const check = async () => {
      const session = await this.d.sessions.get(call.sessionId);
      if (!session || session.state !== 'pending' || session.workerId !== null || Date.now() >= deadline) return;
      this.d.log.warn(
        { sessionId: call.sessionId, room: call.roomName },
        'no worker took the call; dispatching it again',
      );
      await this.d.livekit!.dispatchAgent(call.roomName, call.sessionId);
      schedule();
    };
    const schedule = () =>
      setTimeout(
        () =>
          void check().catch((err: unknown) =>
            this.d.log.warn({ err, sessionId: call.sessionId }, 'could not dispatch the call again'),
          ),
        REDISPATCH_AFTER_MS,
      ).unref();
    schedule();
  }

  /** The scene a mint plays, or the refusal: 403 not enabled, 404 unknown/expired/failed, 409 building, 429 over the scene-call limit. */
  private async checkScene(
    tx: Tx,
    tenantId: string,
    videoCacheId: string,
    policy: TenantPolicy,
    sceneCalls: number,
  ): Promise<{ id: string }> {
    if (!policy.scene_sessions_enabled)
      throw new ApiError('scene_sessions_not_enabled', 'Scene sessions are not enabled for this workspace');
    const found = await sceneForMint(tx, tenantId, videoCacheId);
    const scene = found && { id: found.sceneId, status: found.status };
    if (!scene || scene.status === 'failed') {
      throw new ApiError(
        'scene_not_found',
        `Scene ${videoCacheId.slice(0, 80)} not found (unknown, expired, failed, or not this workspace's): prepare it with POST /scenes`,
      );
    }
    if (scene.status !== 'ready')
      throw new ApiError('scene_not_ready', `Scene ${scene.id} is still building: retry once it is ready`);
    if (sceneCalls >= policy.max_concurrent_scene_sessions) {
      throw new ApiError(
        'scene_concurrency_limit_reached',
        `At most ${policy.max_concurrent_scene_sessions} scene calls run at once in this workspace: retry once one ends`,
      );
    }
    return scene;
  }

  /**
   * How many seconds the call can reserve: what it asks, capped by the wallet's available credits
   * and the room left by the key's spend limit and those of the keys it was minted under; 402 when
   * that is below min(asked, LIVE_MIN_RESERVATION_SECONDS).
   */
  private async affordableSeconds(tx: Tx, caller: Caller, asked: number): Promise<number> {
    const [w] = await tx<{ available: number }[]>`
      select balance_credit_micros - reserved_credit_micros as available from credit_wallets where tenant_id = ${caller.tenantId}`;
    const available = Number(w?.available ?? 0);
    const room = await spendRoom(tx, caller.apiKeyId);
    const keyRoom = room.roomCreditMicros === null ? Number.POSITIVE_INFINITY : Number(room.roomCreditMicros);
    const seconds = Math.min(asked, Math.floor(Math.min(available, keyRoom) / MICROS_PER_SECOND));
    const floor = Math.min(asked, this.d.config.LIVE_MIN_RESERVATION_SECONDS);
    if (seconds >= floor) return seconds;
    const needed = floor * MICROS_PER_SECOND;
    if (available < needed) {
      throw new ApiError(
        'insufficient_credits',
        `Insufficient credits: a call needs at least ${needed} credit micros (${floor} s) and ${available} are available`,
        {
          requiredCreditMicros: needed,
          availableCreditMicros: available,
        },
      );
    }
    throw spendLimitError(room, `leaves less than ${floor} s of call time`);
  }

  /**
   * Ends a call (free of charge: it bills what ran, as any end) or takes a ticket out of its
   * queue. Idempotent: on an ended call it answers the recorded end again. Conversation rooms are
   * deleted (the user and the avatar leave); a provider's room is theirs and stays (the avatar
   * leaves when its worker sees the end on its next heartbeat).
   */
  async release(caller: Caller, input: ReleaseInput): Promise<ReleaseOutcome> {
    const { sql, sessions, capacity } = this.d;
    if (input.ticketId) {
      const ticket = await capacity.ticket(input.ticketId);
      if (!ticket || ticket.tenantId !== caller.tenantId) throw notFound(`Queue ticket ${input.ticketId.slice(0, 80)}`);
      await capacity.leaveQueue(ticket);
      return { kind: 'ticket', ticketId: ticket.ticketId, capacityPool: ticket.pool };
    }
    const id = input.sessionId!;
    const session = await tenantSession(sql, caller.tenantId, id);
    if (!session) throw notFound(`Session ${id.slice(0, 80)}`);
    const ended = (await sessions.end(id, input.reason ?? DEFAULT_RELEASE_REASON))!;
    await this.closeRoomForUser(session);
    await capacity.release(ended.session.capacityPool, id);
    const usage = await this.d.usage.get(caller.tenantId, id);
    return {
      kind: 'session',
      sessionId: id,
      capacityPool: ended.session.capacityPool,
      endReason: ended.session.endReason ?? DEFAULT_RELEASE_REASON,
      endedAt: (ended.session.endedAt ?? new Date()).toISOString(),
      status: usage?.status ?? 'failed',
      billedCreditMicros: usage?.billedCreditMicros ?? 0,
    };
  }

  /**
   * Redeems a grant's join token from a page of the request's `Origin` (once; refusals: join.ts) for
   * the user's LiveKit token, minted now with the usual lifetime.
   */
  async join(joinToken: string, origin: string | undefined): Promise<JoinGrant> {
    const { config, livekit, log } = this.d;
    if (!livekit) throw noLiveKit();
    const target = await redeemJoinToken(this.d.sql, joinToken, origin);
    const participantToken = await livekit.userToken(
      target.roomName,
      target.userIdentity,
      config.LIVE_TOKEN_TTL_SECONDS,
    );
    log.info({ sessionId: target.sessionId, origin }, 'live call join token redeemed');
    return {
      sessionId: target.sessionId,
      serverUrl: livekit.serverUrl,
      participantToken,
      avatarIdentity: target.avatarIdentity,
    };
  }

  /** Drops expired join tokens (the janitor). */
  purgeExpiredJoinTokens(): Promise<number> {
    return purgeExpiredJoinTokens(this.d.sql);
  }

  /**
   * A verified LiveKit webhook: a connection observation of the call whose room it is (source
   * `webhook`, recorded once per event id), and the end of the call when its room finished or its
   * user or avatar left. Events of rooms that are no call of ours are ignored.
   */
  async onWebhook(event: {
    id: string;
    event: string;
    createdAt: bigint;
    room?: { name: string };
    participant?: { identity: string };
    track?: { type: number; source: number };
  }): Promise<void> {
    const { sql, sessions } = this.d;
    const roomName = event.room?.name;
    if (!roomName) return;
    const session = await sessionOfRoom(sql, roomName);
    if (!session) return;
    const at = event.createdAt > 0n ? new Date(Number(event.createdAt) * 1000) : new Date();
    if (event.event === 'room_finished') {
      await sessions.end(session.id, 'room_finished', at);
      return;
    }
    const identity = event.participant?.identity;
    const kind = WEBHOOK_KIND[event.event];
    if (!identity || !kind) return;
    const role = participantRole(session, identity);
    await sessions.observe(session.id, {
      participantIdentity: identity,
      role,
      kind,
      trackKind: event.track ? (TRACK_KIND[event.track.type] ?? null) : null,
      trackSource: event.track ? (TRACK_SOURCE[event.track.source] ?? null) : null,
      occurredAt: at,
      source: 'webhook',
      eventId: event.id || null,
    });
    if (kind === 'left' && (role === 'user' || role === 'avatar')) {
      if ((await sessions.end(session.id, `${role}_left`, at))?.endedNow)
        await (role === 'user' ? this.closeRoomForUser(session) : this.closeRoom(session));
    }
  }

  /** The janitor's pass over live calls: abandoned calls ended and settled, leaked slots freed, stale tickets dropped. */
  async sweep(): Promise<StaleSessionsEnded & { slotsFreed: number }> {
    const ended = await endStaleSessions(this.d.sessions, this.d.sql, {
      heartbeatTimeoutSeconds: this.d.config.LIVE_HEARTBEAT_TIMEOUT_SECONDS,
      joinTimeoutSeconds: this.d.config.LIVE_JOIN_TIMEOUT_SECONDS,
      maxDurationGraceSeconds: MAX_DURATION_GRACE_SECONDS,
    });
    // A conversation room outlives a lost worker (the user is still in it): close it.
    for (const s of [...ended.overdue, ...ended.lost, ...ended.unjoined]) await this.closeRoom(s);
    const slotsFreed = await this.d.capacity.reconcile();
    return { ...ended, slotsFreed };
  }

  /**
   * Ends a conversation call's room for its user (released, or the user left): where the call's
   * avatar is in the room, only the user is removed (if still there), and the avatar, seeing them
   * go, ends the call, has its voice agent leave and closes the room after it; otherwise the room is
   * deleted now. A room deleted under the worker's two connections made LiveKit's Rust SDK log
   * errors in the worker at the end of calls that went well.
   */
  private async closeRoomForUser(s: Pick<LiveSession, 'id' | 'mode' | 'roomName' | 'avatarIdentity' | 'userIdentity'>) {
    const livekit = this.d.livekit;
    if (s.mode !== 'conversation' || !livekit) return;
    const present = await livekit.participants(s.roomName).catch(() => null);
    if (s.userIdentity && present?.includes(s.avatarIdentity)) {
      if (!present.includes(s.userIdentity)) return;
      const removed = await livekit.removeParticipant(s.roomName, s.userIdentity).then(
        () => true,
        () => false,
      );
      if (removed) return;
    }
    await this.closeRoom(s);
  }

  /** Deletes a conversation call's room, which disconnects whoever is left in it; a provider's room is theirs and stays. */
  private async closeRoom(s: Pick<LiveSession, 'id' | 'mode' | 'roomName'>): Promise<void> {
    if (s.mode !== 'conversation' || !this.d.livekit) return;
    await this.d.livekit
      .deleteRoom(s.roomName)
      .catch((err: unknown) => this.d.log.warn({ err, sessionId: s.id }, 'could not delete the room of an ended call'));
  }

  /** A live session of the tenant (for reads), or 404. */
  async get(tenantId: string, sessionId: string): Promise<LiveSession> {
    const s = await tenantSession(this.d.sql, tenantId, sessionId);
    if (!s) throw notFound(`Session ${sessionId.slice(0, 80)}`);
    return s;
  }
}

/** The idle pool must have a playable member: 503 while members are pending, 409 when none ever will. */
function checkIdlePool(...args: Parameters<typeof assertIdlePoolPlayable>): void {
  try {
    assertIdlePoolPlayable(...args);
  } catch (err) {
    if (err instanceof ClipLibraryNotReady)
      throw new ApiError(
        'clip_library_not_ready',
        `The avatar's idle clips are still being prepared (${err.pendingMembers.join(', ')}): retry shortly`,
      );
    if (err instanceof IdlePoolExhausted) {
      throw new ApiError(
        'avatar_state_conflict',
        'No idle clip of this avatar can play (every weighted member failed or was retired): declare the clip library again',
      );
    }
    throw err;
  }
}

const WEBHOOK_KIND: Record<string, ConnectionEventInput['kind'] | undefined> = {
  participant_joined: 'joined',
  participant_left: 'left',
  track_published: 'track_published',
  track_unpublished: 'track_unpublished',
};

/** LiveKit's TrackType and TrackSource enums, as names. */
const TRACK_KIND: Record<number, 'audio' | 'video' | undefined> = { 0: 'audio', 1: 'video' };
const TRACK_SOURCE: Record<number, string | undefined> = {
  0: 'unknown',
  1: 'camera',
  2: 'microphone',
  3: 'screen_share',
  4: 'screen_share_audio',
};
