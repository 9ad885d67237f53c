/**
 * The avatar's side of its room connection, apart from the call it plays: joining (its access
 * token, a second try when a publication goes unanswered), who is in the room and as what, the
 * user audio it subscribes to, the RPCs it answers for its agent, the tracks it publishes, and
 * leaving (closing the room when the call created it).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  LocalAudioTrack,
  LocalVideoTrack,
  ParticipantKind,
  Room,
  RoomEvent,
  TrackKind,
  TrackPublishOptions,
  TrackSource,
  VideoCodec,
  type AudioSource,
  type LocalParticipant,
  type RemoteParticipant,
  type RemoteTrack,
  type RemoteTrackPublication,
  type VideoSource,
} from '@livekit/rtc-node';
import { AccessToken } from 'livekit-server-sdk';
import { LiveKit } from '../../core/live/livekit.ts';
import type { Config } from '../../core/platform/config.ts';
import type { Logger } from '../../core/platform/log.ts';
import { orAfter } from '../../core/platform/time.ts';
import { RPC_CALL_ENDED, RPC_PLAY_ACTION, RPC_USER_SPEECH_STARTED } from '../protocol.ts';
import { resubscribeStalledTracks } from '../stalled-tracks.ts';
import type { Body } from './body.ts';
import { boundedStep } from './bounded-step.ts';
import type { CallSpec, ParticipantRole } from './call.ts';
import type { SpeechPlayout } from './playout.ts';
import { AvatarAudioReceiver } from './receiver.ts';
import type { UserAudio } from './user-audio.ts';

export type VideoCodecName = Config['AGENT_VIDEO_CODEC'];
const VIDEO_CODECS: Record<VideoCodecName, VideoCodec> = { h264: VideoCodec.H264, vp8: VideoCodec.VP8 };
const VIDEO_MAX_BITRATE = 1_200_000n;
/** The token outlives the longest call (waiting for its user included) by this much. */
const TOKEN_SLACK_SECONDS = 600;
/**
 * After unpublishing, the engine renegotiates its publisher once its 150 ms debounce has passed
 * (livekit/src/rtc_engine/rtc_session.rs, PUBLISHER_NEGOTIATION_FREQUENCY); leaving sooner makes
 * that offer fail on a closed connection.
 */
const UNPUBLISHED_SETTLE_MS = 400;
/** How long the avatar waits for its voice agent's answer to RPC_CALL_ENDED. */
const AGENT_ANSWER_MS = 1000;
/**
 * How long the avatar waits for its voice agent to have left before it closes the room all the
 * same, and how often it asks LiveKit. The server lists a participant that left for about 2.3 s
 * more (measured on the local server).
 */
const AGENT_LEAVE_MS = 3500;
const AGENT_LEAVE_POLL_MS = 200;
/** Tries at joining a call's room (connect and publish) before the call fails. */
const JOIN_ATTEMPTS = 2;

/** The avatar's token: an agent participant of the call's room that publishes on behalf of the agent it speaks for. */
async function avatarToken(
  livekit: { apiKey: string; apiSecret: string },
  spec: Pick<CallSpec, 'roomName' | 'avatarIdentity' | 'avatarName' | 'agentIdentity' | 'maxDurationSeconds'>,
  userJoinTimeoutMs: number,
): Promise<string> {
  const at = new AccessToken(livekit.apiKey, livekit.apiSecret, {
    identity: spec.avatarIdentity,
    name: spec.avatarName,
    attributes: { 'lk.publish_on_behalf': spec.agentIdentity },
    ttl: spec.maxDurationSeconds + Math.ceil(userJoinTimeoutMs / 1000) + TOKEN_SLACK_SECONDS,
  });
  at.kind = 'agent';
  at.addGrant({ room: spec.roomName, roomJoin: true, canPublish: true, canSubscribe: true, canPublishData: true });
  return at.toJwt();
}

/** Answers the avatar's RPCs (agent/protocol.ts) for `agentIdentity` alone: play an action, the user started speaking. */
export function answerAgentRpcs(
  lp: Pick<LocalParticipant, 'registerRpcMethod'>,
  agentIdentity: string,
  body: Body,
): void {
  lp.registerRpcMethod(RPC_PLAY_ACTION, async (data) => {
    if (data.callerIdentity !== agentIdentity) return 'reject';
    let actionId: unknown;
    try {
      actionId = (JSON.parse(data.payload) as { action_id?: unknown }).action_id;
    } catch {
      // answered below
    }
    if (typeof actionId !== 'string') return JSON.stringify({ accepted: false, reason: 'unknown_action' });
    return JSON.stringify(body.requestAction(actionId));
  });
  // In conversation mode our voice agent hears the user (its VAD) and says when they start speaking.
  lp.registerRpcMethod(RPC_USER_SPEECH_STARTED, async (data) => {
    if (data.callerIdentity !== agentIdentity) return 'reject';
    body.userSpeechStarted();
    return 'ok';
  });
}

/**
 * Publishes the avatar's audio and video as one stream, so that receivers that synchronise playout
 * (browsers) keep the lips on the audio; one video layer (no simulcast): one encode per frame,
 * which is what bounds calls per core.
 */
async function publishAvatarTracks(
  lp: LocalParticipant,
  avatarIdentity: string,
  sources: { audio: AudioSource; video: VideoSource },
  video: { codec: VideoCodecName; fps: number },
): Promise<void> {
  const stream = `${avatarIdentity}-av`;
  // One after the other, audio first: published at once (tried, to start calls sooner), the
  // recording `npm run call` makes of the call came out 150 ms out of sync, against 90 ms.
  await lp.publishTrack(
    LocalAudioTrack.createAudioTrack('avatar_audio', sources.audio),
    new TrackPublishOptions({ source: TrackSource.SOURCE_MICROPHONE, stream }),
  );
  await lp.publishTrack(
    LocalVideoTrack.createVideoTrack('avatar_video', sources.video),
    new TrackPublishOptions({
      source: TrackSource.SOURCE_CAMERA,
      stream,
      simulcast: false,
      videoCodec: VIDEO_CODECS[video.codec],
      videoEncoding: { maxFramerate: video.fps, maxBitrate: VIDEO_MAX_BITRATE },
    }),
  );
}

export interface AvatarRoomOptions {
  livekit: { url: string; apiKey: string; apiSecret: string };
  spec: CallSpec;
  userJoinTimeoutMs: number;
  video: { codec: VideoCodecName; fps: number };
  log: Logger;
  /** The call is ending: no track is heard any more, and a failed join is not tried again. */
  ending: () => boolean;
  /** Opens a user's audio track the avatar hears. */
  openUserAudio: (track: RemoteTrack) => UserAudio;
  /** A participant joined or left (the avatar's own joining is the caller's to report). */
  onParticipant: (identity: string, role: ParticipantRole, kind: 'joined' | 'left') => void;
  onReconnected: () => void;
  /** The connection in use closed (not one a failed join left behind). */
  onClosed: () => void;
}

/** What the avatar brings into the room: its agent's speech goes to `playout`, its RPCs to `body`, its tracks from `sources`. */
export interface AvatarRoomParts {
  playout: SpeechPlayout;
  body: Body;
  sources: { audio: AudioSource; video: VideoSource };
}

/** The call's room connection (a new one when joining had to be tried again). */
export class AvatarRoom {
  private room = new Room();
  /** The agent's speech, received on the connection in use; null before joining. */
  receiver: AvatarAudioReceiver | null = null;
  private readonly userAudio = new Map<string, UserAudio>();

  constructor(private readonly o: AvatarRoomOptions) {}

  /**
   * Joins the room, trying once more on a new connection when the first fails; throws when it
   * cannot. The connection is made while `parts` are still being made (the avatar's media loads):
   * the call's first second waits for the longer of the two, not both.
   */
  async join(parts: Promise<AvatarRoomParts>): Promise<void> {
    let partsFailed = false;
    const ready = parts.catch((err: unknown) => {
      partsFailed = true;
      throw err;
    });
    // Not unhandled while the connection is made: connect() awaits it.
    ready.catch(() => {});
    for (let attempt = 1; ; attempt++) {
      try {
        await this.connect(ready);
        return;
      } catch (err) {
        if (partsFailed || attempt >= JOIN_ATTEMPTS || this.o.ending()) throw err;
        // The room is joined but a track's publication goes unanswered (rtc-node gives up after
        // 10 s): a server that lost it, or an engine stuck on its own negotiation (LiveKit's Rust
        // SDK before 0.12.74 could deadlock there: package.json overrides it). A new connection publishes.
        this.o.log.warn({ err, attempt }, 'could not join the call; joining again');
        const failed = this.room;
        this.room = new Room();
        // Bounded: the failed connection's disconnect can hang (seen in CI), and the retry must not wait on it.
        await boundedStep(this.o.log, 'leave the room of the failed join', () => failed.disconnect());
      }
    }
  }

  /** Who is in the room now, and as what. */
  present(): { identity: string; role: ParticipantRole }[] {
    return [...this.room.remoteParticipants.values()].map((p) => ({ identity: p.identity, role: this.roleOf(p) }));
  }

  hasUser(): boolean {
    return [...this.room.remoteParticipants.values()].some((p) => this.roleOf(p) === 'user');
  }

  closeUserAudio(): Promise<unknown> {
    return Promise.all([...this.userAudio.values()].map((u) => u.close()));
  }

  /**
   * Leaves the room. The tracks are unpublished first, and the engine given the time to send the
   * publisher's new offer: LiveKit's Rust SDK, left with published tracks, unpublishes them itself
   * and closes its connection at once, so the renegotiation it has just scheduled finds the
   * connection closed and logs an error (`failed to negotiate the publisher`) at every call's end.
   */
  async leave(): Promise<void> {
    const lp = this.room.localParticipant;
    if (this.room.isConnected && lp && lp.trackPublications.size > 0) {
      for (const sid of [...lp.trackPublications.keys()]) await lp.unpublishTrack(sid, false).catch(() => {});
      await sleep(UNPUBLISHED_SETTLE_MS);
    }
    await this.room.disconnect();
  }

  /**
   * Asks the call's voice agent to leave, where the call created the room (a provider's agent is
   * theirs, and stays). Awaited only for its answer: it leaves as the avatar does.
   */
  async dismissAgent(): Promise<void> {
    const { spec } = this.o;
    if (!spec.ownsRoom || !this.room.isConnected || !this.room.remoteParticipants.has(spec.agentIdentity)) return;
    const asked = this.room
      .localParticipant!.performRpc({
        destinationIdentity: spec.agentIdentity,
        method: RPC_CALL_ENDED,
        payload: '',
        responseTimeout: AGENT_ANSWER_MS,
      })
      .catch(() => {});
    // Bounded here: to an agent already leaving (it does as the user leaves), rtc-node 0.13 gives
    // up on the call only after its 7 s connection timeout, whatever the response timeout.
    await orAfter(asked, AGENT_ANSWER_MS, 'late' as const);
  }

  /**
   * Milliseconds until LiveKit closes the room for want of a user, when the call created it (the
   * room's empty timeout runs from its creation, and an avatar and a voice agent do not count as
   * present); null when nothing closes it.
   */
  msUntilEmptyRoomCloses(): number | null {
    const { emptyTimeout, creationTime } = this.room;
    if (!this.o.spec.ownsRoom || !emptyTimeout || creationTime.getTime() <= 0) return null;
    return creationTime.getTime() + emptyTimeout * 1000 - Date.now();
  }

  /**
   * Deletes the room, where the call created it (conversation mode); a provider's room stays. The
   * voice agent is given the time to leave first (bounded): the room closed under it, LiveKit's Rust
   * SDK in the voice process logged errors at the end of calls that went well.
   */
  async closeIfOwned(): Promise<void> {
    const { spec, livekit, log } = this.o;
    if (!spec.ownsRoom) return;
    const rooms = new LiveKit(livekit);
    await boundedStep(log, 'wait for the voice agent to leave', async () => {
      const until = performance.now() + AGENT_LEAVE_MS;
      while (performance.now() < until && (await rooms.participants(spec.roomName)).includes(spec.agentIdentity))
        await sleep(AGENT_LEAVE_POLL_MS);
    });
    await boundedStep(log, 'close the room', () => rooms.deleteRoom(spec.roomName));
  }

  /** Connects to the call's room as the avatar, answers its RPCs and publishes its audio and video. */
  private async connect(partsReady: Promise<AvatarRoomParts>): Promise<void> {
    const { spec, log } = this.o;
    const room = this.room;
    room.on(RoomEvent.ParticipantConnected, (p) => this.o.onParticipant(p.identity, this.roleOf(p), 'joined'));
    room.on(RoomEvent.ParticipantDisconnected, (p) => this.o.onParticipant(p.identity, this.roleOf(p), 'left'));
    room.on(RoomEvent.TrackPublished, (pub, p) => this.subscribeIfHeard(pub, p));
    room.on(RoomEvent.TrackSubscribed, (track, pub, p) => this.onTrack(track, pub, p));
    room.on(RoomEvent.TrackUnsubscribed, (_track, pub, p) => this.closeTrackAudio(p.identity, pub.sid));
    room.on(RoomEvent.Reconnected, () => this.o.onReconnected());
    room.on(RoomEvent.Disconnected, () => void (room === this.room ? this.o.onClosed() : undefined));

    // Subscribed to nothing by default: a subscribed audio track costs the worker its receipt and
    // decoding (about 8 ms of CPU a second) though nothing reads it.
    await room.connect(this.o.livekit.url, await avatarToken(this.o.livekit, spec, this.o.userJoinTimeoutMs), {
      autoSubscribe: false,
      dynacast: false,
    });
    for (const p of room.remoteParticipants.values())
      for (const pub of p.trackPublications.values()) this.subscribeIfHeard(pub, p);
    resubscribeStalledTracks(room, {
      wanted: (pub, p) => this.hears(pub.kind, p),
      onResubscribe: (track) => this.o.log.warn(track, "the user's audio track never came; subscribing again"),
    });
    const parts = await partsReady;
    const receiver = new AvatarAudioReceiver({ room, playout: parts.playout, senderIdentity: spec.agentIdentity, log });
    this.receiver = receiver;
    receiver.start();
    const lp = room.localParticipant!;
    answerAgentRpcs(lp, spec.agentIdentity, parts.body);
    await publishAvatarTracks(lp, spec.avatarIdentity, parts.sources, this.o.video);
  }

  private roleOf(p: RemoteParticipant): ParticipantRole {
    const { spec } = this.o;
    if (p.identity === spec.agentIdentity) return 'agent';
    if (spec.userIdentity) return p.identity === spec.userIdentity ? 'user' : 'other';
    return p.kind === ParticipantKind.AGENT ? 'other' : 'user';
  }

  /** The avatar hears the user's audio for its own VAD (provider mode) and for the recording; nothing else. */
  private hears(kind: TrackKind | undefined, p: RemoteParticipant): boolean {
    return (
      !this.o.ending() &&
      kind === TrackKind.KIND_AUDIO &&
      this.roleOf(p) === 'user' &&
      (this.o.spec.mode === 'provider' || this.o.spec.record)
    );
  }

  private subscribeIfHeard(pub: RemoteTrackPublication, p: RemoteParticipant): void {
    if (this.hears(pub.kind, p)) pub.setSubscribed(true);
  }

  private onTrack(track: RemoteTrack, pub: RemoteTrackPublication, p: RemoteParticipant): void {
    if (!this.hears(track.kind, p)) return;
    const key = `${p.identity}/${pub.sid}`;
    this.userAudio
      .get(key)
      ?.close()
      .catch(() => {});
    this.userAudio.set(key, this.o.openUserAudio(track));
  }

  private closeTrackAudio(identity: string, sid: string | undefined): void {
    const key = `${identity}/${sid}`;
    const u = this.userAudio.get(key);
    if (!u) return;
    this.userAudio.delete(key);
    void u.close();
  }
}
