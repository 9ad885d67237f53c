/** The behaviour engine: weighted idle pool, listening reactions, action menu, scheduler. Pure and seeded. */
export * from './types.ts';
export * from './errors.ts';
export * from './prng.ts';
export * from './idle.ts';
export * from './reactions.ts';
export * from './scheduler.ts';

import { createIdleSelector, type IdleSelector } from './idle.ts';
import { createReactionPicker, type ReactionPicker } from './reactions.ts';
import type { Availability, Behavior } from './types.ts';

export interface BehaviorEngine extends IdleSelector, ReactionPicker {}

/** One engine: `next()` (idle), `onUserSpeechStarted()`, `actionMenu()`, `playAction(id)`; independent seeded streams. */
export function createBehaviorEngine(behavior: Behavior, availability: Availability, seed: number): BehaviorEngine {
  const idle = createIdleSelector(behavior, availability, seed);
  const picker = createReactionPicker(behavior, availability, seed);
  return {
    next: () => idle.next(),
    last: () => idle.last(),
    onUserSpeechStarted: () => picker.onUserSpeechStarted(),
    actionMenu: () => picker.actionMenu(),
    playAction: (id) => picker.playAction(id),
  };
}
