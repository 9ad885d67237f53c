import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ClipLibraryNotReady } from './errors.ts';
import { createScheduler, type Play, type SchedulerEvent } from './scheduler.ts';
import { availabilityFrom, type Availability, type Behavior } from './types.ts';

const allReady: Availability = () => 'ready';
const behavior: Behavior = {
  idle: { clips: ['breathe', 'look_around'] },
  on: { userSpeechStarted: { clips: ['lean_in', 'nod'] } },
  actions: {
    wave: { description: 'Wave hello', clips: ['wave_1', 'wave_2'] },
    bow: { description: 'Bow', clips: ['bow'] },
  },
};

describe('scheduler', () => {
  it('starts idle; interrupts are queued and play at the clip boundary, then back to idle', () => {
    const s = createScheduler(behavior, allReady, 1);
    const first = s.start();
    expect(first.kind).toBe('idle');
    expect(s.handle({ type: 'userSpeechStarted' })).toEqual({ play: null });
    expect(s.handle({ type: 'actionRequested', actionId: 'wave' })).toEqual({ play: null, action: { accepted: true } });
    expect(s.current()).toEqual(first); // nothing cut mid-clip
    expect(s.pending()).toBe(2);
    const r = s.handle({ type: 'clipEnded' }).play as Play;
    expect(r.kind).toBe('reaction');
    expect(['lean_in', 'nod']).toContain(r.clipId);
    const a = s.handle({ type: 'clipEnded' }).play as Play;
    expect(a).toMatchObject({ kind: 'action', actionId: 'wave' });
    expect(['wave_1', 'wave_2']).toContain(a.clipId);
    expect((s.handle({ type: 'clipEnded' }).play as Play).kind).toBe('idle');
    expect(s.pending()).toBe(0);
  });

  it('rejects unknown or unplayable actions at request time', () => {
    const s = createScheduler(
      behavior,
      availabilityFrom({ breathe: 'ready', look_around: 'ready', bow: 'pending' }, true),
      1,
    );
    s.start();
    expect(s.handle({ type: 'actionRequested', actionId: 'dance' })).toEqual({
      play: null,
      action: { accepted: false, reason: 'unknown_action' },
    });
    expect(s.handle({ type: 'actionRequested', actionId: 'bow' })).toEqual({
      play: null,
      action: { accepted: false, reason: 'no_available_take' },
    });
    expect(s.pending()).toBe(0);
  });

  it('a reaction with nothing ready is skipped (keep idling)', () => {
    const s = createScheduler(
      { ...behavior, on: { userSpeechStarted: { clips: ['lean_in'] } } },
      availabilityFrom({ breathe: 'ready', lean_in: 'failed' }, true),
      2,
    );
    s.start();
    s.handle({ type: 'userSpeechStarted' });
    expect((s.handle({ type: 'clipEnded' }).play as Play).kind).toBe('idle');
  });

  it('surfaces ClipLibraryNotReady from the idle pool', () => {
    const s = createScheduler(
      { idle: { clips: ['a'], weights: { source: 0 } } },
      availabilityFrom({ a: 'pending' }, true),
      1,
    );
    expect(() => s.start()).toThrow(ClipLibraryNotReady);
  });

  it('property: one reaction per userSpeechStarted event, every interrupt at a boundary, idle picks never repeat immediately, deterministic', () => {
    const eventArb = fc.oneof(
      fc.constant<SchedulerEvent>({ type: 'clipEnded' }),
      fc.constant<SchedulerEvent>({ type: 'userSpeechStarted' }),
      fc.constantFrom<SchedulerEvent>(
        { type: 'actionRequested', actionId: 'wave' },
        { type: 'actionRequested', actionId: 'bow' },
      ),
    );
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 80 }), fc.integer(), (events, seed) => {
        const run = () => {
          const s = createScheduler(behavior, allReady, seed);
          const plays: Play[] = [s.start()];
          for (const e of events) {
            const { play } = s.handle(e);
            if (e.type !== 'clipEnded') expect(play).toBeNull();
            else plays.push(play as Play);
          }
          // Drain the queue.
          while (s.pending() > 0) plays.push(s.handle({ type: 'clipEnded' }).play as Play);
          return plays;
        };
        const plays = run();
        const speech = events.filter((e) => e.type === 'userSpeechStarted').length;
        const actions = events.filter((e) => e.type === 'actionRequested').length;
        expect(plays.filter((p) => p.kind === 'reaction')).toHaveLength(speech);
        expect(plays.filter((p) => p.kind === 'action')).toHaveLength(actions);
        const idle = plays.filter((p) => p.kind === 'idle').map((p) => p.clipId);
        for (const id of idle) expect(['source', 'breathe', 'look_around']).toContain(id);
        for (let i = 1; i < idle.length; i++) expect(idle[i]).not.toBe(idle[i - 1]);
        expect(run()).toEqual(plays);
      }),
      { seed: 99, numRuns: 100 },
    );
  });
});
