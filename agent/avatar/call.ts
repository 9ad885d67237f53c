/**
 * What the avatar side of a call needs from the rest of the worker: the call's description, and
 * where its lifecycle and recording are reported (the database, in the worker; memory in tests).
 */
import type { AvatarPlayback } from '../../core/avatars/playback.ts';
import type { LiveSessionMode } from '../../core/live/sessions.ts';
import type { SceneContinuation } from '../../core/scenes/types.ts';

export interface CallSpec {
  sessionId: string;
  tenantId: string;
  mode: LiveSessionMode;
  roomName: string;
  /** The avatar's participant identity (the grant's `avatar_identity`). */
  avatarIdentity: string;
  /** Shown name of the avatar participant. */
  avatarName: string;
  /** The agent the avatar speaks for (`lk.publish_on_behalf`): our voice agent, or the customer's in provider mode. */
  agentIdentity: string;
  /** The end user's identity (conversation mode); null in provider mode, where any other non-agent participant is the user. */
  userIdentity: string | null;
  /** Billable seconds at most: the call ends when it has run this long since it started. */
  maxDurationSeconds: number;
  record: boolean;
  /** The picture: the avatar's clips under its behaviour, or a scene's clip. */
  body:
    { kind: 'avatar'; playback: AvatarPlayback } | { kind: 'scene'; cacheKey: string; continuation: SceneContinuation };
  /** We created the room for this call: it is deleted when the call ends. */
  ownsRoom: boolean;
}

/** Why a call ended. `failed`: it could not run (billed 0 unless it had started). */
export type EndReason =
  | 'user_left'
  | 'agent_left'
  | 'room_closed'
  | 'max_duration'
  | 'user_never_joined'
  | 'released'
  | 'worker_shutdown'
  | 'failed';

export type ParticipantRole = 'user' | 'avatar' | 'agent' | 'other';

export interface ConnectionObservation {
  participantIdentity: string;
  role: ParticipantRole;
  kind: 'joined' | 'left' | 'reconnected' | 'track_published' | 'track_unpublished';
  trackKind?: 'audio' | 'video';
  trackSource?: string;
  at: Date;
}

/** Where a call's lifecycle goes. Every method may be called from any state; the reporter keeps the rules (once only, in order). */
export interface CallReporter {
  /** The avatar is in the room and publishing. */
  joined(): Promise<void>;
  /** The avatar and the user are both present: billing starts at `at`. */
  started(at: Date): Promise<void>;
  /** Still alive; answers whether the call was ended elsewhere meanwhile (released through the API). */
  heartbeat(): Promise<{ ended: boolean }>;
  observe(o: ConnectionObservation): Promise<void>;
  /** The call is over (billing stops at `at`). Called exactly once. */
  ended(reason: EndReason, at: Date): Promise<void>;
}

/** Where a call's recording goes: its row and its object in storage. */
export interface CallRecordingSink {
  /** Creates the recording (status processing); returns the storage key to write the MP4 to. */
  begin(): Promise<{ recordingId: string; storageKey: string }>;
  /** The MP4 is in storage. */
  ready(recordingId: string, info: { durationSeconds: number; sizeBytes: number }): Promise<void>;
  failed(recordingId: string, reason: string): Promise<void>;
}
