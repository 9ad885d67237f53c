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
  /** `settings.greeting`: what the avatar says as a live call starts. */
  greeting: 500,
} as const;

/** The language an avatar speaks when its settings name none. */
export const DEFAULT_LANGUAGE = 'en';

const LANGUAGE_NAMES = new Intl.DisplayNames(['en'], { type: 'language', fallback: 'none' });

/** The English name of an ISO 639-1 code ("fr" → "French"), or undefined for anything else (three letters, a region, an unknown pair). */
export function languageName(code: string): string | undefined {
  return /^[a-z]{2}$/.test(code) ? LANGUAGE_NAMES.of(code) : undefined;
}

/** What a live call reads from an avatar's free-form settings (the API validated both fields on the way in). */
export interface LiveSettings {
  /** Said as written when the user joins a conversation call; null: the avatar waits for the user. */
  greeting: string | null;
  /** ISO 639-1: what the user is transcribed in and the LLM is told to answer in. */
  language: string;
}

export function liveSettings(settings: Record<string, unknown> | null | undefined): LiveSettings {
  const g = settings?.greeting;
  const l = settings?.language;
  return {
    greeting: typeof g === 'string' && g.trim().length > 0 ? g : null,
    language: typeof l === 'string' && languageName(l) ? l : DEFAULT_LANGUAGE,
  };
}

/** Session instructions after merging (template + profile + custom metadata). */
export const SESSION_INSTRUCTIONS_MAX = 16_000;

export interface ProfileInput {
  displayName: string;
  personality?: string | null;
  background?: string | null;
  replyStyle?: string | null;
  metadata?: Record<string, unknown> | null;
  /** `settings.language`; a language other than English adds a section telling the LLM to answer in it. */
  language?: string | null;
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
  const language = p.language && p.language !== DEFAULT_LANGUAGE ? languageName(p.language) : undefined;
  if (language) parts.push(`## Language\nThe user speaks ${language}. Always answer in ${language}.`);
  return parts.join('\n\n');
}
