/**
 * The avatar's side of its room connection, apart from the call it plays: its access token, the
 * RPCs it answers for its agent, and the tracks it publishes.
 */
import {
  LocalAudioTrack,
  LocalVideoTrack,
  TrackPublishOptions,
  TrackSource,
  VideoCodec,
  type AudioSource,
  type LocalParticipant,
  type VideoSource,
} from '@livekit/rtc-node';
import { AccessToken } from 'livekit-server-sdk';
import type { Config } from '../../core/platform/config.ts';
import { RPC_PLAY_ACTION, RPC_USER_SPEECH_STARTED } from '../protocol.ts';
import type { Body } from './body.ts';
import type { CallSpec } from './call.ts';

export type VideoCodecName = Config['AGENT_VIDEO_CODEC'];
const VIDEO_CODECS: Record<VideoCodecName, VideoCodec> = { h264: VideoCodec.H264, vp8: VideoCodec.VP8 };
const VIDEO_MAX_BITRATE = 1_200_000n;
/** The token outlives the longest call (waiting for its user included) by this much. */
const TOKEN_SLACK_SECONDS = 600;

/** The avatar's token: an agent participant of the call's room that publishes on behalf of the agent it speaks for. */
export async function avatarToken(
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
export async function publishAvatarTracks(
  lp: LocalParticipant,
  avatarIdentity: string,
  sources: { audio: AudioSource; video: VideoSource },
  video: { codec: VideoCodecName; fps: number },
): Promise<void> {
  const stream = `${avatarIdentity}-av`;
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
