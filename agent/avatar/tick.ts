/** The avatar host's tick grid: every call's due frame is looked at each tick, and sooner when one falls due between ticks. */

export const TICK_MS = 10;

/**
 * The tick after the one scheduled at `scheduled`, now being `now`: the first time on the grid after
 * now. A wake for a frame falls between ticks; counting it as a tick would push the grid ahead of the
 * clock, and the loop would then sleep past the frames it should start drawing (every call stalled
 * for seconds at 4 calls before this). Behind by more than a few ticks (a stall), the grid starts
 * again from now rather than racing to catch up.
 */
export function nextTick(scheduled: number, now: number): number {
  let next = now - scheduled > 5 * TICK_MS ? now : scheduled;
  while (next <= now) next += TICK_MS;
  return next;
}
