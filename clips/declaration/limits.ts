/**
 * Limits of the clip-library declaration (PUT /avatars/{avatarId}/clips), as the public API
 * documents them. Lengths are UTF-16 code units (JavaScript `length`), measured after trimming.
 */

/** Clip and action ids: 1 to 64 letters, digits, underscores, hyphens (the `avatar_clips.clip_id` check). */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const ACTION_DESCRIPTION_MAX = 512;
/**
 * The motion prompt limit of render's generator (render/generate/prompt.ts MOTION_PROMPT_MAX), which
 * clips/ may not import: core/avatars/screen.test.ts holds the two equal.
 */
export const MOTION_PROMPT_MAX = 1_200;
export const ASSET_ID_MAX = 160;
export const DURATION_MIN_SECONDS = 4;
export const DURATION_MAX_SECONDS = 8;
export const DEFAULT_DURATION_SECONDS = 5;
/** Every clip list (idle, listening, each action): nonempty, no repeats, at most this many. */
export const CLIP_LIST_MAX = 32;
export const WEIGHT_MIN = 0;
export const WEIGHT_MAX = 100;
/** JSON body cap of the route (413 above it); enforced by the route (api/routes/avatars/put-clips.ts), not here. */
export const DECLARATION_BODY_CAP_BYTES = 64 * 1024;

/** The source loop's member id in the idle pool, and an idle member's weight when none is declared: shared with the behaviour engine. */
export { SOURCE_MEMBER_ID } from '../behavior/types.ts';

/**
 * Ids refused as clip ids and as action ids (compared case-insensitively, so `Source` and
 * `DEFAULT` are refused too: a reader cannot tell them apart from the reserved word at a glance).
 *
 * - `source`: the source loop's member id in the idle pool; a clip with that id would make
 *   `idle.weights.source` ambiguous.
 * - `__proto__`, `constructor`, `prototype`: object-prototype names. As record keys they either
 *   vanish in parsing (`__proto__` sets the prototype instead of a key) or collide with inherited
 *   members in code that indexes plain objects.
 * - `default`: the platform's default clips are rows flagged `is_default`; `default` as an id would
 *   read as "the default clip/action" in selection rules and logs.
 * - `none`, `all`: kept free as selector words for behavior rules (no clip / every clip), so a
 *   later rule can use them without colliding with a tenant's clip or action.
 */
export const RESERVED_IDS: readonly string[] = Object.freeze([
  'source',
  '__proto__',
  'constructor',
  'prototype',
  'default',
  'none',
  'all',
]);

const RESERVED = new Set(RESERVED_IDS);

export function isReservedId(id: string): boolean {
  return RESERVED.has(id.toLowerCase());
}
