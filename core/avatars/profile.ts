/**
 * Avatar profile text: the limits (as the public API documents them, in UTF-16 code units, i.e.
 * JavaScript string length) and the session-instructions template that merges the profile into what a live session
 * or turn gives the LLM. The merged text must fit SESSION_INSTRUCTIONS_MAX.
 */

export const PROFILE_LIMITS = {
  displayName: 160,
  personality: 4_000,
  background: 8_000,
  artDirection: 2_500,
  replyStyle: 1_000,
} as const;

/** Session instructions after merging (template + profile + custom metadata). */
export const SESSION_INSTRUCTIONS_MAX = 16_000;

export interface ProfileInput {
  displayName: string;
  personality?: string | null;
  background?: string | null;
  replyStyle?: string | null;
  metadata?: Record<string, unknown> | null;
}

/**
 * The one template (documented in docs/avatars.md). Sections whose field is empty are left out;
 * custom metadata is appended as compact JSON. Art direction is visual and not part of it.
 */
export function sessionInstructions(p: ProfileInput): string {
  const parts = [`You are ${p.displayName}, a realtime talking avatar. Stay in character.`];
  if (p.personality) parts.push(`## Personality\n${p.personality}`);
  if (p.background) parts.push(`## Background\n${p.background}`);
  if (p.replyStyle) parts.push(`## Reply style\n${p.replyStyle}`);
  if (p.metadata && Object.keys(p.metadata).length > 0) parts.push(`## Custom metadata\n${JSON.stringify(p.metadata)}`);
  return parts.join('\n\n');
}
