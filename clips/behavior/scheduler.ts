/**
 * The playback scheduler the agent drives: idle clips, listening reactions and actions.
 *
 * Decision: interrupts take effect at the CLIP BOUNDARY. Clips are anchored to the avatar's pose
 * (they start and end on the anchor frame), so the end of a clip is the only seamless cut point;
 * cutting mid-clip would jump the body. A listening reaction or an action requested while a clip
 * plays is queued and starts when that clip ends; after the queue drains, playback returns to the
 * idle selector. Queued interrupts play in arrival order (FIFO), one entry per event, so every
 * userSpeechStarted event yields exactly one reaction draw. The draw happens at the boundary,
 * against the availability of that moment; a draw that finds nothing ready is skipped.
 */
import { createIdleSelector, type IdleSelector } from './idle.ts';
import { createReactionPicker, type ActionTake, type ReactionPicker } from './reactions.ts';
import type { Availability, Behavior } from './types.ts';

export type Play =
  | { kind: 'idle'; clipId: string }
  | { kind: 'reaction'; clipId: string }
  | { kind: 'action'; clipId: string; actionId: string };

export type SchedulerEvent =
  { type: 'clipEnded' } | { type: 'userSpeechStarted' } | { type: 'actionRequested'; actionId: string };

export interface SchedulerResult {
  /** What to start now, or null: keep playing the current clip (an interrupt may have been queued). */
  play: Play | null;
  /** For `actionRequested`: whether the request was accepted (queued) or why not. */
  action?: { accepted: true } | { accepted: false; reason: 'unknown_action' | 'no_available_take' };
}

export interface Scheduler {
  /** The first clip (an idle pick). Throws `ClipLibraryNotReady` / `IdlePoolExhausted` like the idle selector. */
  start(): Play;
  handle(event: SchedulerEvent): SchedulerResult;
  /** The clip now playing, or null before `start()`. */
  current(): Play | null;
  /** Number of queued interrupts not yet started. */
  pending(): number;
}

type Queued = { type: 'reaction' } | { type: 'action'; actionId: string };

export interface SchedulerParts {
  idle: IdleSelector;
  picker: ReactionPicker;
}

export function createScheduler(behavior: Behavior, availability: Availability, seed: number): Scheduler {
  return schedulerFrom({
    idle: createIdleSelector(behavior, availability, seed),
    picker: createReactionPicker(behavior, availability, seed),
  });
}

export function schedulerFrom({ idle, picker }: SchedulerParts): Scheduler {
  const queue: Queued[] = [];
  let playing: Play | null = null;

  const nextPlay = (): Play => {
    while (queue.length > 0) {
      const q = queue.shift() as Queued;
      if (q.type === 'reaction') {
        const clipId = picker.onUserSpeechStarted();
        if (clipId !== null) return { kind: 'reaction', clipId };
      } else {
        const take: ActionTake = picker.playAction(q.actionId);
        if (take.ok) return { kind: 'action', clipId: take.clipId, actionId: q.actionId };
      }
    }
    return { kind: 'idle', clipId: idle.next() };
  };

  return {
    start() {
      playing = { kind: 'idle', clipId: idle.next() };
      return playing;
    },
    handle(event) {
      switch (event.type) {
        case 'clipEnded':
          playing = nextPlay();
          return { play: playing };
        case 'userSpeechStarted':
          queue.push({ type: 'reaction' });
          return { play: null };
        case 'actionRequested': {
          if (!picker.actionMenu().some((a) => a.id === event.actionId)) {
            // Not on the menu: unknown, or declared with no ready take (playAction draws nothing then).
            const probe = picker.playAction(event.actionId);
            const reason = probe.ok ? 'no_available_take' : probe.reason;
            return { play: null, action: { accepted: false, reason } };
          }
          queue.push({ type: 'action', actionId: event.actionId });
          return { play: null, action: { accepted: true } };
        }
      }
    },
    current: () => playing,
    pending: () => queue.length,
  };
}
