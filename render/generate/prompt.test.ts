/** Prompt -> plan -> parameter tracks, and the idle layer's timing rules (no rendering). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GenerateError } from './errors.ts';
import { checkClipDuration } from './generate.ts';
import { NEUTRAL_PARAMS, PARAM_NAMES } from './motion.ts';
import type { MotionPlan } from './prompt.ts';
import { normalizePrompt, planFromPrompt, planTrack } from './prompt.ts';
import { BLINK_CLOSE_S, BLINK_OPEN_S, idleLayer, scheduleBlinks, prng } from './track.ts';

const kinds = (plan: MotionPlan): string[][] => plan.segments.map((s) => s.actions.map((a) => a.kind));

describe('planFromPrompt', () => {
  it('maps the documented keywords', () => {
    expect(kinds(planFromPrompt('nod', 5))).toEqual([['nod']]);
    expect(kinds(planFromPrompt('shake your head', 5))).toEqual([['shake']]);
    expect(kinds(planFromPrompt('Raise eyebrows', 5))).toEqual([['brows']]);
    expect(kinds(planFromPrompt('looks surprised', 5))).toEqual([['surprise']]);
    expect(kinds(planFromPrompt('look away', 5))).toEqual([['look']]);
    expect(kinds(planFromPrompt('ponder', 5))).toEqual([['think']]);
    expect(kinds(planFromPrompt('listen attentively', 5))).toEqual([['listen']]);
    expect(kinds(planFromPrompt('agree', 5))).toEqual([['agree']]);
    expect(kinds(planFromPrompt('disagree', 5))).toEqual([['disagree']]);
    expect(kinds(planFromPrompt('say hello', 5))[0]).toContain('greet');
    expect(kinds(planFromPrompt('laugh', 5))).toEqual([['laugh']]);
    expect(planFromPrompt('nod and smile', 5).unrecognized).toEqual([]);
  });

  it('reads direction, intensity and tempo modifiers', () => {
    const left = planFromPrompt('look left', 5).segments[0]!.actions[0]!;
    expect(left).toMatchObject({ kind: 'look', direction: 'left', intensity: 1, tempo: 1 });
    const slow = planFromPrompt('nod slowly', 5).segments[0]!.actions[0]!;
    expect(slow.tempo).toBeLessThan(1);
    const fast = planFromPrompt('shake head quickly a lot', 5).segments[0]!.actions[0]!;
    expect(fast.tempo).toBeGreaterThan(1);
    expect(fast.intensity).toBeGreaterThan(1);
    expect(planFromPrompt('smile slightly', 5).segments[0]!.actions[0]!.intensity).toBeLessThan(1);
    expect(planFromPrompt('nod twice', 5).segments[0]!.actions[0]!.repeats).toBe(2);
  });

  it('sequences clauses over the clip and keeps its ends free', () => {
    const plan = planFromPrompt('nod slowly, then look right; then smile', 6);
    expect(kinds(plan)).toEqual([['nod'], ['look'], ['smile']]);
    expect(plan.segments[0]!.start).toBeGreaterThan(0);
    expect(plan.segments[2]!.end).toBeLessThan(6);
    for (let i = 1; i < plan.segments.length; i++)
      expect(plan.segments[i]!.start).toBeCloseTo(plan.segments[i - 1]!.end, 2);
  });

  it('falls back to idle motion and reports unknown words', () => {
    const plan = planFromPrompt('dance the macarena', 5);
    expect(kinds(plan)).toEqual([['idle']]);
    expect(plan.unrecognized).toEqual(['dance', 'macarena']);
    expect(planFromPrompt('nod and juggle', 5).unrecognized).toEqual(['juggle']);
  });

  it('rejects empty and overlong prompts', () => {
    expect(() => normalizePrompt('   ')).toThrow(GenerateError);
    expect(() => normalizePrompt('')).toThrow(/empty/);
    expect(() => normalizePrompt('a'.repeat(1201))).toThrow(/1,200|1200/);
    expect(normalizePrompt(` ${'nod '.repeat(300).trim()} `)).toHaveLength(1199);
  });

  it('takes whole durations of 4 to 8 seconds only', () => {
    for (const d of [4, 5, 6, 7, 8]) expect(checkClipDuration(d)).toBe(d);
    expect(checkClipDuration(undefined)).toBe(5);
    for (const d of [3, 9, 4.5, 0, -5, NaN, '5']) {
      expect(() => checkClipDuration(d)).toThrow(GenerateError);
      try {
        checkClipDuration(d);
      } catch (e) {
        expect((e as GenerateError).code).toBe('invalid_duration');
        expect((e as Error).message).toMatch(/4 to 8/);
      }
    }
  });
});

describe('planTrack', () => {
  const fps = 25;
  const track = (prompt: string, d = 5) => planTrack(planFromPrompt(prompt, d), d * fps, fps);
  const swings = (xs: number[]): number => {
    // Local extrema beyond 1 degree from zero.
    let n = 0;
    for (let i = 1; i < xs.length - 1; i++) {
      if (Math.abs(xs[i]!) > 1 && (xs[i]! - xs[i - 1]!) * (xs[i + 1]! - xs[i]!) < 0) n++;
    }
    return n;
  };

  it('"nod slowly" oscillates pitch (chin down), not yaw', () => {
    const t = track('nod slowly');
    const pitch = t.map((p) => p.pitch);
    expect(Math.min(...pitch)).toBeLessThan(-5);
    expect(swings(pitch)).toBeGreaterThanOrEqual(2);
    expect(Math.max(...t.map((p) => Math.abs(p.yaw)))).toBeLessThan(0.5);
    // Slower than a plain nod: fewer swings.
    expect(swings(pitch)).toBeLessThan(swings(track('nod').map((p) => p.pitch)));
  });

  it('"shake head" oscillates yaw both ways, not pitch', () => {
    const t = track('shake head');
    const yaw = t.map((p) => p.yaw);
    expect(Math.max(...yaw)).toBeGreaterThan(5);
    expect(Math.min(...yaw)).toBeLessThan(-5);
    expect(swings(yaw)).toBeGreaterThanOrEqual(3);
    expect(Math.max(...t.map((p) => Math.abs(p.pitch)))).toBeLessThan(0.5);
  });

  it('starts and ends every gesture at the neutral pose', () => {
    for (const prompt of [
      'nod',
      'shake head quickly',
      'laugh, then look up',
      'greet',
      'think then tilt head right',
      'surprised',
    ]) {
      const t = track(prompt, 4);
      for (const k of PARAM_NAMES) {
        expect(t[0]![k]).toBe(0);
        expect(Math.abs(t[t.length - 1]![k])).toBeLessThan(0.05);
      }
    }
  });
});

describe('idle layer', () => {
  it('is periodic: frame N would equal frame 0, which is neutral', () => {
    const fps = 25;
    const n = 8 * fps;
    const a = idleLayer(n, fps, 'seed');
    expect(a.params[0]).toEqual({ ...NEUTRAL_PARAMS });
    // The terms are whole cycles over n frames: evaluating a loop twice as long with half the
    // cycles is not the same thing, so check continuity across the wrap directly.
    const last = a.params[n - 1]!;
    const second = a.params[1]!;
    for (const k of PARAM_NAMES) expect(Math.abs(last[k] - second[k])).toBeLessThan(0.1 + Math.abs(second[k]) * 2);
  });

  it('is deterministic given the seed', () => {
    expect(idleLayer(100, 25, 42)).toEqual(idleLayer(100, 25, 42));
    expect(idleLayer(100, 25, 42)).not.toEqual(idleLayer(100, 25, 43));
  });

  it('schedules blinks 2-6 s apart, across the wrap too, never straddling it', () => {
    fc.assert(
      fc.property(fc.integer({ min: 4, max: 30 }), fc.integer(), (seconds, seed) => {
        const peaks = scheduleBlinks(seconds, 25, prng(seed), { loop: true });
        expect(peaks.length).toBeGreaterThanOrEqual(1);
        for (const t of peaks) {
          expect(t - BLINK_CLOSE_S).toBeGreaterThan(0);
          expect(t + BLINK_OPEN_S).toBeLessThan(seconds);
          expect(Math.abs(t * 25 - Math.round(t * 25))).toBeLessThan(1e-6);
        }
        const gaps = peaks.slice(1).map((t, i) => t - peaks[i]!);
        gaps.push(seconds - peaks[peaks.length - 1]! + peaks[0]!);
        for (const g of gaps) {
          expect(g).toBeGreaterThanOrEqual(2 - 0.05);
          expect(g).toBeLessThanOrEqual(6 + 0.05);
        }
      }),
      { numRuns: 200 },
    );
  });
});
