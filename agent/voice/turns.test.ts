import { initializeLogger, VADEventType } from '@livekit/agents';
import * as silero from '@livekit/agents-plugin-silero';
import { AudioFrame } from '@livekit/rtc-node';
import { describe, expect, it } from 'vitest';
import { synthesize } from '../../render/tts/index.ts';
import { PAUSE_KEPT_MS, TURN_END_SILENCE_MS, sileroMinSilence, turnSilences } from './turns.ts';

initializeLogger({ pretty: false, level: 'fatal' });

/** The silence Silero had counted when it reported the end of `pcm` (16 kHz) followed by a second of silence. */
async function endOfSpeechSilence(minSilenceDuration: number, pcm: Int16Array): Promise<number | undefined> {
  const vad = await silero.VAD.load({ minSilenceDuration });
  const stream = vad.stream();
  const audio = new Int16Array(pcm.length + 16_000);
  audio.set(pcm);
  for (let i = 0; i + 160 <= audio.length; i += 160)
    stream.pushFrame(new AudioFrame(audio.slice(i, i + 160), 16_000, 1, 160));
  let silence: number | undefined;
  for await (const ev of stream)
    if (ev.type === VADEventType.END_OF_SPEECH) {
      silence = ev.silenceDuration;
      break;
    }
  stream.close();
  return silence;
}

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

describe("the VADs' silences", () => {
  it('end the speech in the first 32 ms window at or past the setting (Silero alone waits one more)', async () => {
    const { samples, sampleRate } = await synthesize({ text: 'What is a compiler?', voice: 'rms' });
    expect(sampleRate).toBe(16_000);
    expect(await endOfSpeechSilence(sileroMinSilence(96), samples)).toBe(96);
    expect(await endOfSpeechSilence(sileroMinSilence(192), samples)).toBe(192);
    expect(await endOfSpeechSilence(sileroMinSilence(100), samples)).toBe(128);
    expect(await endOfSpeechSilence(96, samples), 'Silero given the setting itself').toBe(128);
  });
});
