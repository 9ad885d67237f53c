/**
 * Listening reactions (one per userSpeechStarted event) and the action menu the language model reads.
 */
import { deriveSeed, mulberry32, pickUniform } from './prng.ts';
import type { Availability, Behavior } from './types.ts';

function readyClips(clips: readonly string[] | undefined, availability: Availability): string[] {
  const out: string[] = [];
  for (const id of clips ?? []) if (!out.includes(id) && availability(id) === 'ready') out.push(id);
  return out;
}

interface ActionMenuEntry {
  id: string;
  description: string;
}

export type ActionTake =
  | { ok: true; actionId: string; clipId: string }
  | { ok: false; actionId: string; reason: 'unknown_action' | 'no_available_take' };

export interface ReactionPicker {
  /**
   * One listening reaction for one userSpeechStarted event: a uniform draw among the ready clips
   * of `on.userSpeechStarted` (repeats allowed), or null when none is ready (keep idling).
   */
  onUserSpeechStarted(): string | null;
  /** The menu the language model reads: actions (declaration order) with at least one ready clip. */
  actionMenu(): ActionMenuEntry[];
  /** A take for a requested action: a uniform draw among its ready clips. */
  playAction(actionId: string): ActionTake;
}

export function createReactionPicker(behavior: Behavior, availability: Availability, seed: number): ReactionPicker {
  const listening = mulberry32(deriveSeed(seed, 'userSpeechStarted'));
  const takes = mulberry32(deriveSeed(seed, 'actions'));
  const actions = behavior.actions ?? {};
  return {
    onUserSpeechStarted() {
      const ready = readyClips(behavior.on?.userSpeechStarted?.clips, availability);
      return ready.length > 0 ? pickUniform(listening, ready) : null;
    },
    actionMenu() {
      const menu: ActionMenuEntry[] = [];
      for (const [id, action] of Object.entries(actions)) {
        if (readyClips(action.clips, availability).length > 0) menu.push({ id, description: action.description });
      }
      return menu;
    },
    playAction(actionId) {
      if (!Object.hasOwn(actions, actionId)) return { ok: false, actionId, reason: 'unknown_action' };
      const ready = readyClips((actions[actionId] as { clips: string[] }).clips, availability);
      if (ready.length === 0) return { ok: false, actionId, reason: 'no_available_take' };
      return { ok: true, actionId, clipId: pickUniform(takes, ready) };
    },
  };
}
