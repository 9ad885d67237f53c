import { AudioFrame } from '@livekit/rtc-node';
import { describe, expect, it } from 'vitest';
import type { Logger } from '../../core/platform/log.ts';
import { synthesizeAhead } from './greeting.ts';
import type { ttsFor } from './tts.ts';

const FRAME_MS = 300;
const RATE = 24_000;

/** A TTS that has each clause's audio at once: 300 ms frames, `framesPerClause` of them. */
function instantTts(framesPerClause: number) {
  return {
    async *synthesize() {
      for (let i = 0; i < framesPerClause; i++) {
        const n = (RATE * FRAME_MS) / 1000;
        yield { frame: new AudioFrame(new Int16Array(n), RATE, 1, n) };
      }
    },
  } as unknown as ReturnType<typeof ttsFor>;
}

describe('the greeting', () => {
  it('is handed to the avatar no more than a second ahead of real time, the first second at once', async () => {
    // Two clauses of 1.5 s: 3 s of audio, all synthesised before it is said.
    const ahead = synthesizeAhead(instantTts(5), 'Hello there, nice to meet you.', Promise.resolve(), {} as Logger);
    expect(await ahead.ready).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    // Timed from before the stream exists (it starts its clock as it first pulls, which may be at once).
    const t0 = performance.now();
    const reader = ahead.stream().getReader();
    const handed: { at: number; audioMs: number }[] = [];
    let audioMs = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      audioMs += (value.samplesPerChannel / value.sampleRate) * 1000;
      handed.push({ at: performance.now() - t0, audioMs });
    }
    expect(audioMs).toBe(3000);
    // The first second (and the frame that starts it) without waiting.
    expect(handed.find((h) => h.audioMs >= 1200)!.at).toBeLessThan(150);
    // Never more than a second (and a frame) ahead of the time since it was said.
    for (const h of handed) expect(h.audioMs - h.at, `${h.audioMs} ms handed at ${h.at} ms`).toBeLessThanOrEqual(1300);
    // And not held back beyond that: the last frame goes a second before its audio would end.
    expect(handed.at(-1)!.at).toBeLessThan(2300);
  });
});
