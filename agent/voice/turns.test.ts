import { describe, expect, it } from 'vitest';
import { PAUSE_KEPT_MS, TURN_END_SILENCE_MS, turnSilences } from './turns.ts';

describe('turn-taking settings', () => {
  it(`keeps a ${PAUSE_KEPT_MS} ms pause inside an unfinished sentence at any setting, and a finished one ends sooner`, () => {
    for (let sttSilenceMs = 100; sttSilenceMs <= 1000; sttSilenceMs += 50) {
      for (let finishedMs = 100; finishedMs <= 1000; finishedMs += 50) {
        for (let openMs = 100; openMs <= 1000; openMs += 50) {
          const questionMs = (finishedMs * 2) / 3;
          const s = turnSilences({ sttSilenceMs, questionMs, finishedMs, openMs });
          const at = `stt ${sttSilenceMs}, question ${questionMs}, finished ${finishedMs}, open ${openMs}`;
          // agents-js ends an unfinished turn after the longer of the VAD's silence and maxDelay:
          // it outlasts the pause, the fading word before it and the time the VAD takes to hear speech resume.
          expect(Math.max(s.vadSilenceMs, s.openMs), at).toBeGreaterThanOrEqual(TURN_END_SILENCE_MS);
          expect(s.openMs, at).toBeGreaterThanOrEqual(openMs);
          // The turn is weighed once the transcription of its last words has been asked for.
          expect(s.vadSilenceMs, at).toBeGreaterThan(sttSilenceMs);
          expect(s.finishedMs, at).toBeLessThanOrEqual(s.openMs);
          // A question hands the turn over sooner than another sentence.
          expect(s.questionMs, at).toBeLessThanOrEqual(s.finishedMs);
        }
      }
    }
    expect(TURN_END_SILENCE_MS).toBeGreaterThan(PAUSE_KEPT_MS + 200);
    expect(turnSilences({ sttSilenceMs: 100, questionMs: 200, finishedMs: 300, openMs: 700 })).toEqual({
      vadSilenceMs: 200,
      questionMs: 200,
      finishedMs: 300,
      openMs: 700,
    });
    expect(turnSilences({ sttSilenceMs: 250, questionMs: 200, finishedMs: 300, openMs: 500 }).openMs).toBe(
      TURN_END_SILENCE_MS,
    );
    expect(turnSilences({ sttSilenceMs: 400, questionMs: 200, finishedMs: 300, openMs: 900 })).toEqual({
      vadSilenceMs: 450,
      questionMs: 450,
      finishedMs: 450,
      openMs: 900,
    });
  });
});
