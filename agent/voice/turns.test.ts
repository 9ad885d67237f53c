import { describe, expect, it } from 'vitest';
import { INTERRUPTION, PAUSE_KEPT_MS, pauseSafeEndpointing, TURN_END_SILENCE_MS } from './turns.ts';

describe('turn-taking settings', () => {
  it(`keeps a ${PAUSE_KEPT_MS} ms pause inside the turn at any VAD silence and endpointing delay asked for, and leaves a safe delay as asked`, () => {
    for (let vadSilenceMs = 0; vadSilenceMs <= 1000; vadSilenceMs += 50) {
      for (let minDelayMs = 0; minDelayMs <= 1000; minDelayMs += 50) {
        const delay = pauseSafeEndpointing({ vadSilenceMs, minDelayMs });
        // agents-js ends a turn after the longer of the two: it outlasts the pause, the fading word
        // before it and the time the VAD takes to hear speech resume.
        expect(
          Math.max(vadSilenceMs, delay),
          `silence ${vadSilenceMs} ms, delay ${minDelayMs} ms`,
        ).toBeGreaterThanOrEqual(TURN_END_SILENCE_MS);
        expect(delay).toBeGreaterThanOrEqual(minDelayMs);
      }
    }
    expect(TURN_END_SILENCE_MS).toBeGreaterThan(PAUSE_KEPT_MS + 200);
    expect(pauseSafeEndpointing({ vadSilenceMs: 550, minDelayMs: 500 })).toBe(TURN_END_SILENCE_MS);
    expect(pauseSafeEndpointing({ vadSilenceMs: 550, minDelayMs: 900 })).toBe(900);
    expect(pauseSafeEndpointing({ vadSilenceMs: 800, minDelayMs: 100 })).toBe(100);
  });

  it('interrupts the avatar as soon as the VAD hears speech, in the milliseconds agents-js reads', () => {
    // agents-js interrupts on a VAD report whose speech duration reaches this: outside speech it reports 0.
    expect(INTERRUPTION.minDuration).toBeGreaterThan(0);
    expect(INTERRUPTION.minDuration).toBeLessThan(50);
  });
});
