/**
 * Types of the behaviour engine: the idle pool, listening reactions and actions of a clip library.
 *
 * The engine works on the *declared* behaviour as the clip-library PUT stores it (after
 * clips/declaration/validate.ts has validated it) and on a live view of which clips can be served.
 */

/** Member id of the avatar's source loop. It is always a member of the idle pool unless weighted 0. */
export const SOURCE_MEMBER_ID = 'source';

/** The weight of an idle member the declaration does not weight. */
export const DEFAULT_WEIGHT = 1;

/** The declared behaviour (the `behavior` object of the clip-library GET envelope). */
export interface Behavior {
  idle?: {
    /** Authored idle clips; together with the source loop they form the weighted idle pool. */
    clips: string[];
    /**
     * Legacy aggregate weight of the authored idle clips, 0..100. The authored clips share it in
     * total, split evenly (each gets `weight / clips.length`) against the source loop's 1.
     * Never combined with `weights` (the declaration validator refuses that).
     */
    weight?: number;
    /** Member id (`source` or an authored idle clip id) to weight, 0..100; omitted member = 1, 0 disables. */
    weights?: Record<string, number>;
  };
  on?: {
    /** Listening reactions: one of these plays once per userSpeechStarted event. */
    userSpeechStarted?: { clips: string[] };
  };
  /** The requestable action menu, keyed by action id. Declaring an action never plays it by itself. */
  actions?: Record<string, { description: string; clips: string[] }>;
}

/**
 * Serving state of one clip (or of the source loop). Only `ready` is playable; `pending` will
 * become playable when its media work finishes; `failed` and `retired` will not.
 */
export type ClipAvailability = 'ready' | 'pending' | 'failed' | 'retired';

/**
 * Live availability of a member, consulted on every draw (so a clip that becomes ready later
 * joins the pool and the weights renormalise). It is asked about `SOURCE_MEMBER_ID` for the
 * source loop.
 */
export type Availability = (memberId: string) => ClipAvailability;

/** Builds an `Availability` from a status map (missing clip id = `pending`) and the source loop's readiness. */
export function availabilityFrom(
  statuses: Readonly<Record<string, ClipAvailability>>,
  sourceAvailable: boolean,
): Availability {
  return (memberId) => {
    if (memberId === SOURCE_MEMBER_ID) return sourceAvailable ? 'ready' : 'pending';
    return Object.hasOwn(statuses, memberId) ? (statuses[memberId] as ClipAvailability) : 'pending';
  };
}
