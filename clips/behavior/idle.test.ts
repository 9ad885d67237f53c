import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ClipLibraryNotReady, IdlePoolExhausted } from './errors.ts';
import { assessIdlePool, assertIdlePoolPlayable, createIdleSelector, idleMemberWeights } from './idle.ts';
import {
  SOURCE_MEMBER_ID,
  availabilityFrom,
  type Availability,
  type Behavior,
  type ClipAvailability,
} from './types.ts';

const allReady: Availability = () => 'ready';
const FC = { seed: 20240611, numRuns: 40 } as const;

/** Stationary distribution of the no-immediate-repeat chain: i→j = w_j/(W−w_i), so π_i ∝ w_i·(W−w_i). */
function stationary(weights: Record<string, number>): Record<string, number> {
  const W = Object.values(weights).reduce((a, b) => a + b, 0);
  const raw = Object.fromEntries(Object.entries(weights).map(([k, w]) => [k, w * (W - w)]));
  const Z = Object.values(raw).reduce((a, b) => a + b, 0);
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, v / Z]));
}

function frequencies(draw: () => string, n: number): Record<string, number> {
  const counts: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const id = draw();
    counts[id] = (counts[id] ?? 0) + 1;
  }
  return Object.fromEntries(Object.entries(counts).map(([k, c]) => [k, c / n]));
}

/** Behaviour with `ids` as authored idle clips and explicit weights for every member. */
function weighted(weights: Record<string, number>): Behavior {
  return { idle: { clips: Object.keys(weights).filter((k) => k !== SOURCE_MEMBER_ID), weights } };
}

// Pools of 2..5 members (source + up to 4 clips) with integer weights 0..10.
const poolArb = fc
  .array(fc.integer({ min: 0, max: 10 }), { minLength: 2, maxLength: 5 })
  .map((ws) => Object.fromEntries(ws.map((w, i) => [i === 0 ? SOURCE_MEMBER_ID : `clip_${i}`, w])));

describe('idleMemberWeights', () => {
  it('defaults: source and each authored clip weigh 1', () => {
    expect(idleMemberWeights({ idle: { clips: ['a', 'b'] } })).toEqual([
      { id: 'source', weight: 1 },
      { id: 'a', weight: 1 },
      { id: 'b', weight: 1 },
    ]);
    expect(idleMemberWeights({})).toEqual([{ id: 'source', weight: 1 }]);
  });
  it('weights: omitted member = 1, zero disables, non-members ignored', () => {
    expect(idleMemberWeights({ idle: { clips: ['a', 'b'], weights: { source: 0, a: 5, wave: 9 } } })).toEqual([
      { id: 'source', weight: 0 },
      { id: 'a', weight: 5 },
      { id: 'b', weight: 1 },
    ]);
  });
  it('legacy weight: authored clips share it in total, split evenly, vs the source 1', () => {
    expect(idleMemberWeights({ idle: { clips: ['a', 'b', 'c', 'd'], weight: 6 } })).toEqual([
      { id: 'source', weight: 1 },
      { id: 'a', weight: 1.5 },
      { id: 'b', weight: 1.5 },
      { id: 'c', weight: 1.5 },
      { id: 'd', weight: 1.5 },
    ]);
    expect(idleMemberWeights({ idle: { clips: ['a'], weight: 0 } }).map((m) => m.weight)).toEqual([1, 0]);
  });
});

describe('createIdleSelector: weighted pool', () => {
  it('frequencies converge to the no-repeat chain stationary distribution (20,000 draws)', () => {
    const weights = { source: 1, a: 2, b: 3, c: 4, d: 10 };
    const sel = createIdleSelector(weighted(weights), allReady, 7);
    const freq = frequencies(() => sel.next(), 20_000);
    const expected = stationary(weights);
    for (const id of Object.keys(weights)) expect(freq[id] ?? 0).toBeCloseTo(expected[id] as number, 1);
    for (const id of Object.keys(weights))
      expect(Math.abs((freq[id] ?? 0) - (expected[id] as number))).toBeLessThan(0.01);
    // Frequency order follows weight order.
    const byFreq = Object.keys(weights).sort((x, y) => (freq[x] ?? 0) - (freq[y] ?? 0));
    expect(byFreq).toEqual(['source', 'a', 'b', 'c', 'd']);
  });

  it('property: frequencies within tolerance of π_i ∝ w_i(W−w_i) over positive members; order follows weights', () => {
    fc.assert(
      fc.property(poolArb, fc.integer(), (weights, seed) => {
        const positive = Object.fromEntries(Object.entries(weights).filter(([, w]) => w > 0));
        fc.pre(Object.keys(positive).length > 0);
        const sel = createIdleSelector(weighted(weights), allReady, seed);
        const freq = frequencies(() => sel.next(), 6_000);
        const expected =
          Object.keys(positive).length === 1 ? { [Object.keys(positive)[0] as string]: 1 } : stationary(positive);
        for (const [id, p] of Object.entries(expected)) expect(Math.abs((freq[id] ?? 0) - p)).toBeLessThan(0.03);
        for (const id of Object.keys(weights)) if (weights[id] === 0) expect(freq[id]).toBeUndefined();
        // Order: w_i > w_j ⇒ π_i ≥ π_j, so observed frequencies respect it up to the tolerance.
        for (const [i, wi] of Object.entries(positive))
          for (const [j, wj] of Object.entries(positive))
            if (wi > wj) expect((freq[i] ?? 0) + 0.03).toBeGreaterThanOrEqual(freq[j] ?? 0);
      }),
      { ...FC, numRuns: 25 },
    );
  });

  it('property: never an immediate repeat while ≥2 members are available, even as availability changes', () => {
    fc.assert(
      fc.property(
        poolArb,
        fc.array(fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }), { minLength: 1, maxLength: 60 }),
        fc.integer(),
        (weights, steps, seed) => {
          const ids = Object.keys(weights);
          let ready = new Set(ids);
          const sel = createIdleSelector(weighted(weights), (id) => (ready.has(id) ? 'ready' : 'pending'), seed);
          let prev: string | null = null;
          for (const mask of steps) {
            ready = new Set(ids.filter((_, i) => mask[i]));
            const avail = ids.filter((id) => ready.has(id) && (weights[id] as number) > 0);
            if (avail.length === 0) {
              expect(() => sel.next()).toThrow(ClipLibraryNotReady);
              continue;
            }
            const got = sel.next();
            expect(avail).toContain(got);
            if (avail.length >= 2) expect(got).not.toBe(prev);
            prev = got;
          }
        },
      ),
      FC,
    );
  });

  it('a sole available member loops completely', () => {
    const sel = createIdleSelector({ idle: { clips: ['a', 'b'], weights: { source: 0, b: 0 } } }, allReady, 1);
    expect(Array.from({ length: 50 }, () => sel.next())).toEqual(Array(50).fill('a'));
    const onlySource = createIdleSelector({ idle: { clips: ['a'] } }, availabilityFrom({ a: 'failed' }, true), 2);
    expect(Array.from({ length: 10 }, () => onlySource.next())).toEqual(Array(10).fill('source'));
  });

  it('unavailable members never play; when one becomes ready later the weights renormalise', () => {
    const statuses: Record<string, ClipAvailability> = { a: 'ready', b: 'pending', c: 'failed' };
    const weights = { source: 1, a: 2, b: 3, c: 5 };
    const sel = createIdleSelector(weighted(weights), availabilityFrom(statuses, true), 11);
    const before = frequencies(() => sel.next(), 10_000);
    expect(Object.keys(before).sort()).toEqual(['a', 'source']);
    expect(before.source).toBeCloseTo(0.5, 5); // two members strictly alternate
    statuses.b = 'ready';
    const after = frequencies(() => sel.next(), 20_000);
    expect(after.c).toBeUndefined();
    const expected = stationary({ source: 1, a: 2, b: 3 });
    for (const id of ['source', 'a', 'b'])
      expect(Math.abs((after[id] ?? 0) - (expected[id] as number))).toBeLessThan(0.01);
  });

  it('legacy weight converts to aggregate weights (authored clips share it)', () => {
    // weight 3 over three clips → each 1, like the source: uniform pool of four members.
    const sel = createIdleSelector({ idle: { clips: ['a', 'b', 'c'], weight: 3 } }, allReady, 5);
    const freq = frequencies(() => sel.next(), 20_000);
    for (const id of ['source', 'a', 'b', 'c']) expect(Math.abs((freq[id] ?? 0) - 0.25)).toBeLessThan(0.01);
  });

  it('property: determinism: same seed → same sequence', () => {
    fc.assert(
      fc.property(poolArb, fc.integer(), (weights, seed) => {
        fc.pre(Object.values(weights).some((w) => w > 0));
        const s1 = createIdleSelector(weighted(weights), allReady, seed);
        const s2 = createIdleSelector(weighted(weights), allReady, seed);
        const a = Array.from({ length: 100 }, () => s1.next());
        const b = Array.from({ length: 100 }, () => s2.next());
        expect(a).toEqual(b);
      }),
      FC,
    );
    const x = createIdleSelector(weighted({ source: 1, a: 1, b: 1, c: 1 }), allReady, 1);
    const y = createIdleSelector(weighted({ source: 1, a: 1, b: 1, c: 1 }), allReady, 2);
    expect(Array.from({ length: 40 }, () => x.next())).not.toEqual(Array.from({ length: 40 }, () => y.next()));
  });
});

describe('ClipLibraryNotReady', () => {
  const statusArb = fc.constantFrom<ClipAvailability>('ready', 'pending', 'failed', 'retired');

  it('property: thrown exactly when the source is disabled and every positive playable-to-be member is pending', () => {
    fc.assert(
      fc.property(poolArb, fc.array(statusArb, { minLength: 5, maxLength: 5 }), fc.integer(), (weights, st, seed) => {
        const ids = Object.keys(weights);
        const status = Object.fromEntries(ids.map((id, i) => [id, st[i] as ClipAvailability]));
        const availability: Availability = (id) => status[id] ?? 'pending';
        const behavior = weighted(weights);
        const positive = ids.filter((id) => (weights[id] as number) > 0);
        const sourceDisabled = weights.source === 0 || status.source !== 'ready';
        const live = positive.filter((id) => status[id] === 'ready' || status[id] === 'pending');
        const notReady = sourceDisabled && live.length > 0 && live.every((id) => status[id] === 'pending');
        const exhausted = !positive.some((id) => status[id] === 'ready') && live.length === 0;
        const sel = createIdleSelector(behavior, availability, seed);
        if (notReady) {
          expect(() => sel.next()).toThrow(ClipLibraryNotReady);
          expect(() => assertIdlePoolPlayable(behavior, availability)).toThrow(ClipLibraryNotReady);
          expect(assessIdlePool(behavior, availability).status).toBe('not_ready');
        } else if (exhausted) {
          expect(() => sel.next()).toThrow(IdlePoolExhausted);
        } else {
          expect(() => assertIdlePoolPlayable(behavior, availability)).not.toThrow();
          expect(positive).toContain(sel.next());
        }
      }),
      { ...FC, numRuns: 300 },
    );
  });

  it('carries the 503 retryable mapping and the pending members', () => {
    const sel = createIdleSelector(
      { idle: { clips: ['a', 'b'], weights: { source: 0 } } },
      availabilityFrom({ a: 'pending', b: 'pending' }, true),
      3,
    );
    try {
      sel.next();
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ClipLibraryNotReady);
      const err = e as ClipLibraryNotReady;
      expect([err.code, err.status, err.retryable]).toEqual(['clip_library_not_ready', 503, true]);
      expect(err.pendingMembers).toEqual(['a', 'b']);
    }
  });

  it('the source with weight 0 is never played, even when it is the only ready member', () => {
    const availability = availabilityFrom({ a: 'pending' }, true);
    const behavior: Behavior = { idle: { clips: ['a'], weights: { source: 0 } } };
    expect(() => createIdleSelector(behavior, availability, 1).next()).toThrow(ClipLibraryNotReady);
  });
});
