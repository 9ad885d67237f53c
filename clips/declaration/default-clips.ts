/**
 * The default motion library: the clips every avatar gets, generated in the background once its
 * first idle loop publishes (core/avatars/clips.ts). Each prompt uses only words the generator maps
 * (render/generate/PROMPTS.md; `planFromPrompt(...).unrecognized` is empty, asserted by
 * core/avatars/default-clips.test.ts). Durations are whole seconds from 4 to 8 (the generator's clip range).
 *
 * `DEFAULT_MOTION_CLIPS` (core/platform/config.ts) picks which of these a deployment generates (a comma list
 * of ids; empty: none).
 *
 * Leaf module (no imports): core/platform/config.ts validates its ids against it.
 */
export interface DefaultClip {
  clipId: string;
  motionPrompt: string;
  durationSeconds: number;
}

export const DEFAULT_CLIPS: readonly DefaultClip[] = Object.freeze([
  { clipId: 'listen', motionPrompt: 'listen attentively, nod slightly', durationSeconds: 5 },
  { clipId: 'nod', motionPrompt: 'nod', durationSeconds: 4 },
  { clipId: 'smile', motionPrompt: 'smile', durationSeconds: 4 },
  { clipId: 'think', motionPrompt: 'think', durationSeconds: 5 },
]);

export const DEFAULT_CLIP_IDS: readonly string[] = DEFAULT_CLIPS.map((c) => c.clipId);

/** The default clips named by `ids`, in the order of DEFAULT_CLIPS (unknown ids are left out; the config refuses them). */
export function defaultClipsFor(ids: readonly string[]): DefaultClip[] {
  return DEFAULT_CLIPS.filter((c) => ids.includes(c.clipId));
}
