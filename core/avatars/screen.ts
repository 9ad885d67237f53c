import { MOTION_PROMPT_MAX } from '../../render/generate/prompt.ts';
import { ApiError } from '../platform/errors.ts';
import type { Logger } from '../platform/log.ts';

/**
 * Screening of motion prompts (the loop's direction; later clip prompts and action descriptions).
 * The local rule set always runs; a moderation endpoint runs after it when configured. If that
 * endpoint cannot give an answer the write fails closed: 503 clip_screen_unavailable, nothing
 * written.
 */
export type ScreenVerdict = { ok: true; text: string } | { ok: false; reason: string };

export interface PromptScreen {
  /** The trimmed text when accepted. Throws ApiError clip_screen_unavailable when it cannot decide. */
  screen(text: string): Promise<ScreenVerdict>;
}

/**
 * Disallowed content of the local rule set (whole words, case-insensitive): sexual content,
 * graphic violence and self-harm, which an avatar's body motion never needs. Documented in
 * docs/avatars.md; the moderation endpoint is the real screen where one is configured.
 */
const DISALLOWED_TERMS = [
  'nude',
  'nudity',
  'naked',
  'undress',
  'undressing',
  'striptease',
  'sex',
  'sexual',
  'sexy',
  'porn',
  'porno',
  'pornographic',
  'erotic',
  'orgasm',
  'gore',
  'gory',
  'behead',
  'beheading',
  'decapitate',
  'dismember',
  'mutilate',
  'torture',
  'suicide',
  'self-harm',
  'hang himself',
  'hang herself',
  'slit throat',
  'shoot himself',
  'shoot herself',
];

const DISALLOWED_RE = new RegExp(
  `(?<![\\p{L}\\p{N}])(${DISALLOWED_TERMS.map((t) => t.replace(/[-\s]/g, '[-\\s]+')).join('|')})(?![\\p{L}\\p{N}])`,
  'iu',
);

/** The built-in rules: trimmed, nonempty, at most MOTION_PROMPT_MAX (render's generator limit) characters, none of DISALLOWED_TERMS. */
export function localVerdict(text: string): ScreenVerdict {
  const t = text.trim();
  if (t.length === 0)
    return {
      ok: false,
      reason: 'The motion prompt is empty: describe the motion, e.g. "calm, smiling, glances aside now and then"',
    };
  if (t.length > MOTION_PROMPT_MAX)
    return {
      ok: false,
      reason: `The motion prompt is ${t.length} characters long; at most ${MOTION_PROMPT_MAX} are allowed`,
    };
  const hit = DISALLOWED_RE.exec(t);
  if (hit) return { ok: false, reason: `The motion prompt asks for disallowed content ("${hit[1]}")` };
  return { ok: true, text: t };
}

export class LocalPromptScreen implements PromptScreen {
  async screen(text: string): Promise<ScreenVerdict> {
    return localVerdict(text);
  }
}

/**
 * An OpenAI-compatible moderation endpoint (POST {url} with { input }, answer { results: [{ flagged,
 * categories }] }) after the local rules.
 */
export class ModerationPromptScreen implements PromptScreen {
  constructor(
    private readonly url: string,
    private readonly apiKey: string | undefined,
    private readonly log: Logger,
    private readonly timeoutMs = 5_000,
    private readonly model?: string,
  ) {}

  async screen(text: string): Promise<ScreenVerdict> {
    const local = localVerdict(text);
    if (!local.ok) return local;
    const unavailable = () =>
      new ApiError(
        'clip_screen_unavailable',
        'The prompt screen is unavailable right now; nothing was written. Retry with backoff',
      );
    let body: unknown;
    try {
      const res = await fetch(this.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {}),
        },
        body: JSON.stringify({ input: local.text, ...(this.model ? { model: this.model } : {}) }),
        signal: AbortSignal.timeout(this.timeoutMs),
        redirect: 'error',
      });
      if (!res.ok) {
        this.log.warn({ status: res.status }, 'moderation endpoint answered an error');
        throw unavailable();
      }
      body = await res.json();
    } catch (err) {
      if (err instanceof ApiError) throw err;
      this.log.warn({ err }, 'moderation endpoint unreachable');
      throw unavailable();
    }
    const results = (body as { results?: unknown })?.results;
    if (
      !Array.isArray(results) ||
      results.length === 0 ||
      typeof (results[0] as { flagged?: unknown }).flagged !== 'boolean'
    ) {
      this.log.warn('moderation endpoint gave an unreadable answer');
      throw unavailable();
    }
    const first = results[0] as { flagged: boolean; categories?: Record<string, boolean> };
    if (!first.flagged) return local;
    const cats = Object.entries(first.categories ?? {})
      .filter(([, v]) => v === true)
      .map(([k]) => k);
    return {
      ok: false,
      reason: `The motion prompt was refused by moderation${cats.length ? ` (${cats.join(', ')})` : ''}`,
    };
  }
}
