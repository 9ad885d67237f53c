import type { Behavior } from '../../clips/behavior/index.ts';
import type { ClipStatus } from '../../clips/declaration/index.ts';
import type { UploadPoseCheck } from './upload-pose.ts';

/** A clip's status is defined with the clip rules (clips/), which the api and the agent share. */
export { CLIP_STATUSES } from '../../clips/declaration/index.ts';

export const AVATAR_STATUSES = ['draft', 'preprocessing', 'ready', 'failed', 'disabled', 'deleted'] as const;
type AvatarStatus = (typeof AVATAR_STATUSES)[number];
export const IDLE_VIDEO_STATUSES = ['none', 'queued', 'generating', 'ready', 'failed'] as const;
type IdleVideoStatus = (typeof IDLE_VIDEO_STATUSES)[number];

/** Who accepted an uploaded clip against its pose check (POST /avatars/{id}/clips/review). */
interface ClipReview {
  reason: string;
  at: string;
  /** The id of the API key that accepted it. */
  by: string;
}

/** An uploaded clip's stored pose verdict: the machine's (or pending, when a review came first), with the review that accepted it, if any. */
export type ClipPoseCheck = (UploadPoseCheck | { verdict: 'pending' }) & { review?: ClipReview };

export interface AvatarRow {
  id: string;
  tenant_id: string;
  display_name: string;
  source_kind: 'image' | 'video';
  model_id: string;
  source_asset_id: string | null;
  motion_prompt: string | null;
  status: AvatarStatus;
  idle_video_status: IdleVideoStatus;
  error: string | null;
  default_voice_id: string | null;
  /** A JSON object as create or update stored it (CreateAvatarInput), or null. */
  voice: Record<string, unknown> | null;
  llm: Record<string, unknown> | null;
  settings: Record<string, unknown>;
  metadata: Record<string, unknown>;
  personality: string | null;
  background: string | null;
  art_direction: string | null;
  reply_style: string | null;
  anchor_time_ms: number | null;
  serving_loop_key: string | null;
  serving_cache_key: string | null;
  loop_render_pending: boolean;
  cache_manifest_id: string | null;
  cache_version: number;
  deleted_at: Date | null;
  created_at: Date;
  updated_at: Date;
  generation_id: string | null;
  /** Accepted clip-library declarations so far (migration 0007). */
  clip_revision: number;
  /** The declared behaviour (idle / on / actions), null before the first declaration (migration 0007). */
  clip_behavior: Behavior | null;
  /** The clip anchor (portrait) version: moved by a portrait swap. */
  anchor_version: number;
}

/** The Avatar of the wire (camelCase), with the profile fields. */
export interface Avatar {
  id: string;
  tenantId: string;
  displayName: string;
  sourceKind: 'image' | 'video';
  modelId: string;
  sourceAssetId: string | null;
  status: AvatarStatus;
  idleVideoStatus: IdleVideoStatus;
  /** Signed URL of the loop MP4 that serves now; null until one exists. */
  servingUrl: string | null;
  error: string | null;
  defaultVoiceId: string | null;
  cacheManifestId: string | null;
  cacheVersion: number;
  motionPrompt: string | null;
  personality: string | null;
  background: string | null;
  artDirection: string | null;
  replyStyle: string | null;
  anchorTimeMs: number | null;
  /** A JSON object as create or update stored it (CreateAvatarInput), or null. */
  voice: Record<string, unknown> | null;
  llm: Record<string, unknown> | null;
  settings: Record<string, unknown>;
  metadata: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
  /** The avatar's live clips, oldest first: a summary of what GET /avatars/{id}/clips shows with their sources. */
  motionLibrary: MotionLibraryClip[];
}

/** One clip of `Avatar.motionLibrary`. */
export interface MotionLibraryClip {
  clipId: string;
  /** Progress of the clip's latest render, separate from `url` (which keeps serving during a replacement). */
  status: ClipStatus;
  /** Signed URL (1 hour) of the clip's serving MP4; null until one rendered. */
  url: string | null;
  motionPrompt: string | null;
  durationSeconds: number | null;
  error: string | null;
}

/** A row of `avatar_clips` (migration 0006). */
export interface AvatarClipRow {
  avatar_id: string;
  clip_id: string;
  status: ClipStatus;
  source_kind: 'generated' | 'upload';
  motion_prompt: string | null;
  duration_seconds: number | null;
  upload_asset_id: string | null;
  /** The serving outputs: they stay set while a replacement renders or after it failed. */
  mp4_key: string | null;
  cache_key: string | null;
  /** The render that produced mp4_key/cache_key. */
  generation_id: string | null;
  anchor_version: number;
  /** The stored pose verdict of an uploaded clip (ClipPoseCheck), null until one ran or a review accepted it. */
  pose_check: ClipPoseCheck | null;
  error: string | null;
  is_default: boolean;
  retired_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** Data of a clip job (queue AVATAR_CLIPS_JOB): renders one generated clip of the avatar. */
export interface ClipJobData {
  tenantId: string;
  avatarId: string;
  clipId: string;
  /** The portrait was accepted by a person's review: the rig's limits are relaxed, as for the loop. */
  reviewed: boolean;
}

export const AVATAR_CLIPS_JOB = 'avatar-clips';
export const AVATAR_CLIPS_DEAD_JOB = 'avatar-clips-dead';

/**
 * Data of a clip-cache job (queue AVATAR_CLIP_CACHE_JOB): the frame cache of an accepted uploaded
 * clip, built from its stored MP4. Only for the render `generationId` (avatar_clips.generation_id)
 * it was queued for: a later declaration, review or render makes it stale.
 */
export interface ClipCacheJobData {
  tenantId: string;
  avatarId: string;
  clipId: string;
  generationId: string;
}

export const AVATAR_CLIP_CACHE_JOB = 'avatar-clip-cache';
export const AVATAR_CLIP_CACHE_DEAD_JOB = 'avatar-clip-cache-dead';

/** Data of a loop-generation job (queue AVATAR_LOOP_JOB). */
export interface LoopJobData {
  tenantId: string;
  avatarId: string;
  /** Must still be the avatar's generation_id when the loop publishes. */
  generationId: string;
  /** The direction this generation renders (the avatar's motionPrompt once published). */
  motionPrompt: string | null;
  reason: 'create' | 'swap' | 'redirect';
  /** A person reviewed the source (PATCH sourceReview): the rig's pose and size limits are relaxed. */
  reviewed: boolean;
  /** The billed generation (PUT loop), settled when the job ends. */
  usageSessionId: string | null;
  priceCreditMicros: number;
}

export const AVATAR_LOOP_JOB = 'avatar-loop';
export const AVATAR_LOOP_DEAD_JOB = 'avatar-loop-dead';
