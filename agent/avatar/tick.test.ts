import { describe, expect, it } from 'vitest';
import { TICK_MS, nextTick } from './tick.ts';

describe('the host tick grid', () => {
  it('wakes for frames between ticks never push the next tick more than one period past the clock', () => {
    // A busy host wakes every few ms for some call's frame: 1,000 wakes 3 ms apart.
    let next = 0;
    for (let now = 0; now < 3000; now += 3) {
      next = nextTick(next, now);
      expect(next).toBeGreaterThan(now);
      expect(next - now).toBeLessThanOrEqual(TICK_MS);
    }
  });

  it('keeps the 10 ms grid when ticks run on time', () => {
    expect(nextTick(100, 100.4)).toBe(110);
    expect(nextTick(110, 112)).toBe(120);
  });

  it('after a short delay the next tick is the next grid point, not a burst of catch-up ticks', () => {
    expect(nextTick(100, 125)).toBe(130);
  });

  it('after a stall the grid starts again from now', () => {
    expect(nextTick(100, 400)).toBe(410);
  });
});
