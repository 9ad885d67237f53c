/**
 * The weighted idle pool of an avatar's clip library.
 *
 * Members are the source loop (`SOURCE_MEMBER_ID`) and the authored idle clips. Each has a
 * declared weight; each draw considers only the AVAILABLE (`ready`) positive members and
 * renormalises over them. A member never plays twice in a row while another is available; a sole
 * available member loops (it is returned again and again, each play whole).
 */
import { ClipLibraryNotReady, IdlePoolExhausted } from './errors.ts';
import { deriveSeed, mulberry32, pickWeighted } from './prng.ts';
import { DEFAULT_WEIGHT, SOURCE_MEMBER_ID, type Availability, type Behavior } from './types.ts';

export interface IdleMemberWeight {
  id: string;
  weight: number;
}

/** Keeps a declared weight inside the validated domain: non-finite or negative → 0, above 100 → 100. */
function sanitise(w: number): number {
  if (!Number.isFinite(w) || w <= 0) return 0;
  return Math.min(w, 100);
}

/**
 * The declared weight of every idle member, source first then the authored idle clips in
 * declaration order (duplicates and a redundant `source` entry dropped).
 *
 * - `idle.weights`: member id → weight; an omitted member weighs 1; 0 disables. Keys that are not
 *   members (e.g. an action-only clip) are ignored: they never enter the pool.
 * - legacy `idle.weight` (only when `weights` is absent): the authored clips share it in total,
 *   split evenly, against the source's 1. `weight: 0` disables every authored clip.
 * - `weights` together with `weight` is refused by the declaration validator; should it reach
 *   the engine anyway, `weights` wins.
 */
export function idleMemberWeights(behavior: Behavior): IdleMemberWeight[] {
  const authored: string[] = [];
  for (const id of behavior.idle?.clips ?? []) {
    if (id !== SOURCE_MEMBER_ID && !authored.includes(id)) authored.push(id);
  }
  const weights = behavior.idle?.weights;
  if (weights) {
    const of = (id: string) => (Object.hasOwn(weights, id) ? sanitise(weights[id] as number) : DEFAULT_WEIGHT);
    return [SOURCE_MEMBER_ID, ...authored].map((id) => ({ id, weight: of(id) }));
  }
  const legacy = behavior.idle?.weight;
  const each = legacy === undefined || authored.length === 0 ? DEFAULT_WEIGHT : sanitise(legacy) / authored.length;
  return [{ id: SOURCE_MEMBER_ID, weight: DEFAULT_WEIGHT }, ...authored.map((id) => ({ id, weight: each }))];
}

export type IdlePoolState =
  | { status: 'ready'; members: IdleMemberWeight[] }
  | { status: 'not_ready'; pending: string[] }
  | { status: 'exhausted'; positive: string[] };

/**
 * The playable pool right now: positive members whose availability is `ready`.
 * - nonempty → `ready` (the source, if positive and ready, is in it);
 * - empty, and some positive member is `pending` → `not_ready` (the source is then necessarily
 *   weighted 0 or not ready, and every positive member that can still become playable is
 *   pending): the mint answers 503 `clip_library_not_ready`;
 * - empty, no positive member pending (all failed/retired) → `exhausted`.
 */
export function assessIdlePool(behavior: Behavior, availability: Availability): IdlePoolState {
  const positive = idleMemberWeights(behavior).filter((m) => m.weight > 0);
  const ready = positive.filter((m) => availability(m.id) === 'ready');
  if (ready.length > 0) return { status: 'ready', members: ready };
  const pending = positive.filter((m) => availability(m.id) === 'pending').map((m) => m.id);
  if (pending.length > 0) return { status: 'not_ready', pending };
  return { status: 'exhausted', positive: positive.map((m) => m.id) };
}

/** Throws `ClipLibraryNotReady` / `IdlePoolExhausted` unless the idle pool has a playable member (the mint's check). */
export function assertIdlePoolPlayable(behavior: Behavior, availability: Availability): void {
  const state = assessIdlePool(behavior, availability);
  if (state.status === 'not_ready') throw new ClipLibraryNotReady(state.pending);
  if (state.status === 'exhausted') throw new IdlePoolExhausted(state.positive);
}

export interface IdleSelector {
  /**
   * The member id to play next. Throws `ClipLibraryNotReady` or `IdlePoolExhausted` when no
   * member is playable (the selector stays usable: a later call succeeds once one is ready).
   */
  next(): string;
  /** The member returned by the last successful `next()`, or null. */
  last(): string | null;
}

/**
 * A seeded idle selector. Availability is consulted on every `next()`, so members that become
 * ready later join the pool and the weights renormalise. With ≥2 available members the previous
 * pick is excluded and the rest are drawn in proportion to their weights (transition i→j =
 * w_j / (W − w_i)), whose stationary distribution is π_i ∝ w_i·(W − w_i).
 */
export function createIdleSelector(behavior: Behavior, availability: Availability, seed: number): IdleSelector {
  const random = mulberry32(deriveSeed(seed, 'idle'));
  let previous: string | null = null;
  return {
    next() {
      const state = assessIdlePool(behavior, availability);
      if (state.status === 'not_ready') throw new ClipLibraryNotReady(state.pending);
      if (state.status === 'exhausted') throw new IdlePoolExhausted(state.positive);
      const candidates = state.members.length > 1 ? state.members.filter((m) => m.id !== previous) : state.members;
      previous = pickWeighted(
        random,
        candidates.map((m) => ({ item: m.id, weight: m.weight })),
      );
      return previous;
    },
    last: () => previous,
  };
}
