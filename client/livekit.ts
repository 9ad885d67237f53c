/**
 * Our avatar for any LiveKit agent written with agents-js (Node only):
 * `@avatar-platform/client/livekit`.
 *
 *   import { AvatarSession } from '@avatar-platform/client/livekit';
 *
 *   const avatar = new AvatarSession({ avatarId: 'ava_...', apiKey: process.env.AVATAR_API_KEY, baseUrl: 'https://avatars.example.com' });
 *   await avatar.start(session, ctx.room);   // before session.start(): the agent's audio now goes to the avatar
 *   await session.start({ agent, room: ctx.room });
 *
 * In the style of LiveKit's avatar plugins: `start` mints a provider-mode session through our API
 * (`POST /api/v1/realtime/livekit/session` with `room: { name, agent_identity }`); our worker's avatar
 * joins the room on behalf of the agent (attribute `lk.publish_on_behalf`), and the agent's audio output
 * becomes LiveKit's data-stream output to that avatar, which lip-syncs it, publishes it with its body
 * motion, and reports playback and interruptions back. `aclose()` (run by the job's shutdown) releases
 * the session: billing stops. A full capacity queue is waited through (the mint is retried with its
 * ticket after the server's hint, up to `queueTimeoutMs`).
 */
import { voice } from '@livekit/agents';
import { TrackKind, type Room } from '@livekit/rtc-node';

export interface AvatarSessionOptions {
  /** The avatar to use (`ava_...`). */
  avatarId: string;
  /** An API key with scope realtime:write; default AVATAR_API_KEY. */
  apiKey?: string;
  /** The service's origin; default AVATAR_API_URL. */
  baseUrl?: string;
  /** Capacity pool to ask for (the server's default otherwise). */
  capacityPool?: string;
  /** Longest billable duration of the session, seconds (the server's default otherwise). */
  maxDurationSeconds?: number;
  /** How long to wait in a full capacity queue before giving up, ms. Default 60 s. */
  queueTimeoutMs?: number;
  /** fetch to use (tests, proxies). */
  fetch?: typeof fetch;
}

/** The grant of a provider-mode mint (the fields this plugin reads). */
interface ProviderGrant {
  session_id: string;
  avatar_identity: string;
  room_name: string;
  expires_at: string;
  max_duration_seconds: number;
}

/** A refusal of our API: `status`, `code` and the server's message. */
export class AvatarApiError extends Error {
  override name = 'AvatarApiError';
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | undefined,
    readonly requestId: string | undefined,
  ) {
    super(message);
  }
}

export class AvatarSession extends voice.AvatarSession {
  private readonly opts: AvatarSessionOptions & { apiKey: string; baseUrl: string };
  private grant: ProviderGrant | null = null;
  private released = false;

  constructor(options: AvatarSessionOptions) {
    super();
    const apiKey = options.apiKey ?? process.env.AVATAR_API_KEY;
    const baseUrl = options.baseUrl ?? process.env.AVATAR_API_URL;
    if (!apiKey) throw new Error('AvatarSession needs an API key (apiKey or AVATAR_API_KEY)');
    if (!baseUrl) throw new Error('AvatarSession needs the service URL (baseUrl or AVATAR_API_URL)');
    this.opts = { ...options, apiKey, baseUrl: baseUrl.replace(/\/$/, '') };
  }

  override get avatarIdentity(): string {
    return this.grant?.avatar_identity ?? 'unknown';
  }

  override get provider(): string {
    return 'avatar-platform';
  }

  /** The session id of our API (for usage and connection history), once started. */
  get sessionId(): string | null {
    return this.grant?.session_id ?? null;
  }

  /** Mints the avatar for this room and routes the agent session's audio to it. Call before `agentSession.start()`. */
  override async start(agentSession: voice.AgentSession, room: Room): Promise<ProviderGrant> {
    await super.start(agentSession, room);
    const agentIdentity = room.localParticipant?.identity;
    if (!room.name || !agentIdentity) throw new Error('AvatarSession.start needs a connected room (ctx.connect() first)');
    this.grant = await this.mint(room.name, agentIdentity);
    agentSession.output.audio = new voice.DataStreamAudioOutput({
      room,
      destinationIdentity: this.grant.avatar_identity,
      // The avatar publishes its video before it takes audio: the first words are never lost.
      waitRemoteTrack: TrackKind.KIND_VIDEO,
      // The avatar says when a segment really starts playing: transcripts follow the voice.
      waitPlaybackStart: true,
    });
    return this.grant;
  }

  /** Releases the session (idempotent): the avatar leaves, billing stops. */
  override async aclose(): Promise<void> {
    if (this.grant && !this.released) {
      this.released = true;
      await this.call('/api/v1/realtime/livekit/session/release', { session_id: this.grant.session_id, reason: 'manual' }).catch(() => {});
    }
    await super.aclose();
  }

  private async mint(roomName: string, agentIdentity: string): Promise<ProviderGrant> {
    const body: Record<string, unknown> = { avatar_id: this.opts.avatarId, room: { name: roomName, agent_identity: agentIdentity } };
    if (this.opts.capacityPool) body.capacity_pool = this.opts.capacityPool;
    if (this.opts.maxDurationSeconds) body.max_duration_seconds = this.opts.maxDurationSeconds;
    const deadline = Date.now() + (this.opts.queueTimeoutMs ?? 60_000);
    for (;;) {
      const res = await this.call('/api/v1/realtime/livekit/session', body);
      const answer = (await res.json().catch(() => ({}))) as Record<string, unknown>;
      if (res.ok) return answer as unknown as ProviderGrant;
      // The capacity queue (a 429 with a ticket, no code): keep our place and retry after the hint.
      if (res.status === 429 && typeof answer.queue_ticket_id === 'string' && Date.now() < deadline) {
        body.queue_ticket_id = answer.queue_ticket_id;
        await new Promise((r) => setTimeout(r, Math.min(Number(answer.recommended_retry_ms) || 1000, Math.max(0, deadline - Date.now()))));
        continue;
      }
      throw new AvatarApiError(
        typeof answer.error === 'string' ? answer.error : `The avatar could not be started (HTTP ${res.status})`,
        res.status,
        typeof answer.code === 'string' ? answer.code : undefined,
        res.headers.get('x-request-id') ?? undefined,
      );
    }
  }

  private call(path: string, body: unknown): Promise<Response> {
    return (this.opts.fetch ?? fetch)(`${this.opts.baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.opts.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }
}
