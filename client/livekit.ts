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
import { AvatarClient, type MintGrant } from './client.ts';

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
  /** An AvatarClient to use (its key and URL then apply); one is made from apiKey and baseUrl otherwise. */
  client?: AvatarClient;
}

export class AvatarSession extends voice.AvatarSession {
  private readonly client: AvatarClient;
  private grant: MintGrant | null = null;
  private released = false;

  constructor(private readonly opts: AvatarSessionOptions) {
    super();
    if (opts.client) {
      this.client = opts.client;
    } else {
      const apiKey = opts.apiKey ?? process.env.AVATAR_API_KEY;
      const baseUrl = opts.baseUrl ?? process.env.AVATAR_API_URL;
      if (!apiKey) throw new Error('AvatarSession needs an API key (apiKey or AVATAR_API_KEY)');
      if (!baseUrl) throw new Error('AvatarSession needs the service URL (baseUrl or AVATAR_API_URL)');
      this.client = new AvatarClient({ apiKey, baseUrl });
    }
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

  /**
   * Mints the avatar for this room and routes the agent session's audio to it. Call before
   * `agentSession.start()`. A refusal throws the client's ApiError (status, code, requestId).
   */
  override async start(agentSession: voice.AgentSession, room: Room): Promise<MintGrant> {
    await super.start(agentSession, room);
    const agentIdentity = room.localParticipant?.identity;
    if (!room.name || !agentIdentity)
      throw new Error('AvatarSession.start needs a connected room (ctx.connect() first)');
    this.grant = await this.client.live.mintWithQueue(
      {
        avatar_id: this.opts.avatarId,
        room: { name: room.name, agent_identity: agentIdentity },
        ...(this.opts.capacityPool ? { capacity_pool: this.opts.capacityPool } : {}),
        ...(this.opts.maxDurationSeconds ? { max_duration_seconds: this.opts.maxDurationSeconds } : {}),
      },
      { maxWaitMs: this.opts.queueTimeoutMs ?? 60_000 },
    );
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
      await this.client.live.release({ session_id: this.grant.session_id, reason: 'manual' }).catch(() => {});
    }
    await super.aclose();
  }
}
