/**
 * What a live call or a turn plays for an avatar: its serving idle loop, its clips with whether each
 * can be played now, its declared behaviour and its persona. Read by the session mint (is the idle
 * pool playable?) and by the agent worker (what to load and play), so both judge a clip the same way.
 */
import type { Availability, Behavior, ClipAvailability } from '../../clips/behavior/index.ts';
import { availabilityFrom } from '../../clips/behavior/index.ts';
import type { Sql, Tx } from '../platform/db/index.ts';
import { liveSettings, sessionInstructions, type LiveSettings } from './profile.ts';
import type { AvatarClipRow, AvatarRow } from './types.ts';

interface PlaybackClip {
  clipId: string;
  /** Storage prefix of the clip's frame cache (manifest.json, frames.bin, landmarks.f32); null when none serves yet. */
  cacheKey: string | null;
  availability: ClipAvailability;
}

export interface AvatarPlayback {
  avatarId: string;
  tenantId: string;
  displayName: string;
  status: AvatarRow['status'];
  /** Frame cache of the serving idle loop (the `source` member of the idle pool); null until one published. */
  loopCacheKey: string | null;
  /** Moves whenever a new loop publishes: a worker's cached media of an older version is stale. */
  cacheVersion: number;
  /** The avatar's live clips, by id. */
  clips: Map<string, PlaybackClip>;
  /** The declared behaviour; empty when none was declared (the idle pool is then the source loop alone). */
  behavior: Behavior;
  /** Availability for the behaviour engine (asked about `source` for the loop). */
  availability: Availability;
  /** The greeting and the language of its live calls (settings.greeting, settings.language). */
  live: LiveSettings;
  /** The merged persona: what the LLM is told to be (and the language it answers in). */
  instructions: string;
  defaultVoiceId: string | null;
  voice: unknown;
  llm: unknown;
}

/**
 * A clip plays when a frame cache serves for it, even while a replacement renders; otherwise it is
 * pending while a render is under way (or an accepted upload awaits its cache), failed if the last
 * one failed.
 */
function clipAvailability(row: Pick<AvatarClipRow, 'status' | 'cache_key' | 'retired_at'>): ClipAvailability {
  if (row.retired_at) return 'retired';
  if (row.cache_key) return 'ready';
  return row.status === 'failed' ? 'failed' : 'pending';
}

/** The playback plan of a live avatar of the tenant, or undefined (unknown, another tenant's, deleted). */
export async function loadAvatarPlayback(
  sql: Sql | Tx,
  tenantId: string,
  avatarId: string,
): Promise<AvatarPlayback | undefined> {
  const [avatar] = await sql<
    AvatarRow[]
  >`select * from avatars where id = ${avatarId} and tenant_id = ${tenantId} and deleted_at is null`;
  if (!avatar) return undefined;
  const rows = await sql<
    AvatarClipRow[]
  >`select * from avatar_clips where avatar_id = ${avatarId} and retired_at is null order by created_at, clip_id`;
  const clips = new Map<string, PlaybackClip>();
  for (const r of rows)
    clips.set(r.clip_id, { clipId: r.clip_id, cacheKey: r.cache_key, availability: clipAvailability(r) });
  const statuses = Object.fromEntries([...clips.values()].map((c) => [c.clipId, c.availability]));
  return {
    avatarId: avatar.id,
    tenantId: avatar.tenant_id,
    displayName: avatar.display_name,
    status: avatar.status,
    loopCacheKey: avatar.serving_cache_key,
    cacheVersion: avatar.cache_version,
    clips,
    behavior: (avatar.clip_behavior as Behavior | null) ?? {},
    availability: availabilityFrom(statuses, Boolean(avatar.serving_cache_key)),
    live: liveSettings(avatar.settings),
    instructions: sessionInstructions({
      language: liveSettings(avatar.settings).language,
      displayName: avatar.display_name,
      personality: avatar.personality,
      background: avatar.background,
      replyStyle: avatar.reply_style,
      metadata: avatar.metadata,
    }),
    defaultVoiceId: avatar.default_voice_id,
    voice: avatar.voice,
    llm: avatar.llm,
  };
}
