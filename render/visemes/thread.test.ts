/**
 * Audio viseme streams in a worker thread give the frames AudioVisemeStream gives in process, keep
 * concurrent streams apart, and report refused options and dropped streams to the caller.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeTts, synthesize } from '../tts/index.ts';
import {
  AudioVisemeStream,
  createAudioVisemeThread,
  releaseAudioVisemes,
  type AudioVisemeThread,
  type MouthFrame,
} from './index.ts';

let visemes: AudioVisemeThread;

beforeAll(async () => {
  visemes = await createAudioVisemeThread();
}, 60_000);

afterAll(async () => {
  await visemes?.release();
  await closeTts();
  await releaseAudioVisemes();
});

/** Pushes `samples` in 20 ms chunks, then ends. */
async function run(
  stream: { push(s: Int16Array): Promise<MouthFrame[]>; end(): Promise<MouthFrame[]> },
  samples: Int16Array,
  sampleRate: number,
): Promise<MouthFrame[]> {
  const frames: MouthFrame[] = [];
  const step = sampleRate / 50;
  for (let i = 0; i < samples.length; i += step) frames.push(...(await stream.push(samples.slice(i, i + step))));
  frames.push(...(await stream.end()));
  return frames;
}

describe('audio viseme streams in a thread', () => {
  it('give exactly the frames of an in-process stream, two calls at once kept apart', { timeout: 60_000 }, async () => {
    const [a, b] = await Promise.all([
      synthesize({ text: 'Maybe we can fix it with a bit of glue.', voice: 'rms' }),
      synthesize({ text: 'Open the window, please.', voice: 'slt' }),
    ]);
    const [expectedA, expectedB] = [
      await run(new AudioVisemeStream({ sampleRate: a.sampleRate, fps: 25 }), a.samples, a.sampleRate),
      await run(new AudioVisemeStream({ sampleRate: b.sampleRate, fps: 25 }), b.samples, b.sampleRate),
    ];
    const [gotA, gotB] = await Promise.all([
      run(visemes.open({ sampleRate: a.sampleRate, fps: 25 }), a.samples, a.sampleRate),
      run(visemes.open({ sampleRate: b.sampleRate, fps: 25 }), b.samples, b.sampleRate),
    ]);
    expect(gotA.length).toBeGreaterThan(50);
    expect(gotA).toEqual(expectedA);
    expect(gotB).toEqual(expectedB);
    expect(expectedA.some((f) => f.open > 0.3)).toBe(true);
  });

  it('refuses bad options with the reason, and calls on a closed or ended stream', async () => {
    await expect(visemes.open({ sampleRate: 10, fps: 25 }).push(new Int16Array(480))).rejects.toThrow(
      /sampleRate must be an integer/,
    );
    const closed = visemes.open({ sampleRate: 24_000, fps: 25 });
    await closed.push(new Int16Array(480));
    closed.close();
    await expect(closed.push(new Int16Array(480))).rejects.toThrow(/no such audio viseme stream/);
    const ended = visemes.open({ sampleRate: 24_000, fps: 25 });
    await ended.end();
    await expect(ended.end()).rejects.toThrow(/no such audio viseme stream/);
  });
});
