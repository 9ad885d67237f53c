import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createBehaviorEngine } from './index.ts';
import { createIdleSelector } from './idle.ts';
import { createReactionPicker } from './reactions.ts';
import { availabilityFrom, type Availability, type Behavior, type ClipAvailability } from './types.ts';

const allReady: Availability = () => 'ready';
const FC = { seed: 424242, numRuns: 60 } as const;

const behavior: Behavior = {
  idle: { clips: ['breathe', 'nod'] },
  on: { userSpeechStarted: { clips: ['lean_in', 'nod', 'tilt'] } },
  actions: {
    wave: { description: 'Wave hello to the user', clips: ['wave_1', 'wave_2'] },
    shrug: { description: 'Shrug when unsure', clips: ['shrug'] },
    bow: { description: 'Bow politely', clips: ['bow'] },
  },
};

describe('listening reactions', () => {
  it('property: exactly one reaction per event, among the ready listening clips; repeats allowed', () => {
    const statusArb = fc.constantFrom<ClipAvailability>('ready', 'pending', 'failed', 'retired');
    fc.assert(
      fc.property(
        fc.array(statusArb, { minLength: 3, maxLength: 3 }),
        fc.integer({ min: 0, max: 50 }),
        fc.integer(),
        (st, events, seed) => {
          const ids = ['lean_in', 'nod', 'tilt'];
          const status = Object.fromEntries(ids.map((id, i) => [id, st[i] as ClipAvailability]));
          const picker = createReactionPicker(behavior, availabilityFrom(status, true), seed);
          const ready = ids.filter((id) => status[id] === 'ready');
          const results = Array.from({ length: events }, () => picker.onUserSpeechStarted());
          expect(results).toHaveLength(events);
          for (const r of results) {
            if (ready.length === 0) expect(r).toBeNull();
            else expect(ready).toContain(r);
          }
        },
      ),
      FC,
    );
  });

  it('a sole reaction repeats freely; choice is uniform among ready clips', () => {
    const one = createReactionPicker({ on: { userSpeechStarted: { clips: ['lean_in'] } } }, allReady, 1);
    expect(Array.from({ length: 5 }, () => one.onUserSpeechStarted())).toEqual(Array(5).fill('lean_in'));
    const picker = createReactionPicker(behavior, allReady, 9);
    const counts: Record<string, number> = {};
    for (let i = 0; i < 30_000; i++) {
      const r = picker.onUserSpeechStarted() as string;
      counts[r] = (counts[r] ?? 0) + 1;
    }
    for (const id of ['lean_in', 'nod', 'tilt'])
      expect(Math.abs((counts[id] ?? 0) / 30_000 - 1 / 3)).toBeLessThan(0.01);
    // Immediate repeats happen (no no-repeat rule here).
    const seq = Array.from({ length: 200 }, () => picker.onUserSpeechStarted());
    expect(seq.some((x, i) => i > 0 && x === seq[i - 1])).toBe(true);
  });

  it('no listening rule → null (keep idling)', () => {
    expect(createReactionPicker({}, allReady, 1).onUserSpeechStarted()).toBeNull();
  });
});

describe('action menu', () => {
  it('lists actions with at least one ready clip, in declaration order', () => {
    const engine = createBehaviorEngine(
      behavior,
      availabilityFrom({ wave_1: 'failed', wave_2: 'ready', shrug: 'pending', bow: 'ready' }, true),
      1,
    );
    expect(engine.actionMenu()).toEqual([
      { id: 'wave', description: 'Wave hello to the user' },
      { id: 'bow', description: 'Bow politely' },
    ]);
    expect(engine.playAction('wave')).toEqual({ ok: true, actionId: 'wave', clipId: 'wave_2' });
    expect(engine.playAction('shrug')).toEqual({ ok: false, actionId: 'shrug', reason: 'no_available_take' });
    expect(engine.playAction('dance')).toEqual({ ok: false, actionId: 'dance', reason: 'unknown_action' });
    expect(engine.playAction('toString')).toEqual({ ok: false, actionId: 'toString', reason: 'unknown_action' });
  });

  it('takes are uniform among the action clips and deterministic per seed', () => {
    const a = createReactionPicker(behavior, allReady, 77);
    const b = createReactionPicker(behavior, allReady, 77);
    const ta = Array.from({ length: 4000 }, () => a.playAction('wave'));
    const tb = Array.from({ length: 4000 }, () => b.playAction('wave'));
    expect(ta).toEqual(tb);
    const share = ta.filter((t) => t.ok && t.clipId === 'wave_1').length / 4000;
    expect(Math.abs(share - 0.5)).toBeLessThan(0.03);
  });

  it('property: declaring actions never plays them: the idle selector never returns an action-only clip', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'), { minLength: 1, maxLength: 6 }),
        fc.uniqueArray(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'x', 'y'), { minLength: 1, maxLength: 8 }),
        fc.integer(),
        (idleClips, actionClips, seed) => {
          const b: Behavior = {
            idle: { clips: idleClips },
            on: { userSpeechStarted: { clips: actionClips } },
            actions: { go: { description: 'go', clips: actionClips } },
          };
          const sel = createIdleSelector(b, allReady, seed);
          for (let i = 0; i < 200; i++) expect(['source', ...idleClips]).toContain(sel.next());
        },
      ),
      FC,
    );
  });

  it('one clip may appear in idle, listening and action lists', () => {
    const shared: Behavior = {
      idle: { clips: ['nod'], weights: { source: 0 } },
      on: { userSpeechStarted: { clips: ['nod'] } },
      actions: { agree: { description: 'Nod in agreement', clips: ['nod'] } },
    };
    const engine = createBehaviorEngine(shared, allReady, 3);
    expect(engine.next()).toBe('nod');
    expect(engine.onUserSpeechStarted()).toBe('nod');
    expect(engine.playAction('agree')).toEqual({ ok: true, actionId: 'agree', clipId: 'nod' });
  });
});
