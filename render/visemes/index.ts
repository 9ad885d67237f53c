/**
 * Visemes: mouth shapes over time, for lip sync. Two paths give the same per-video-frame parameters
 * (MouthFrame: open, wide, round, press, tuck in [0, 1], the speaking envelope relax, the dominant viseme, and
 * whether the lips are shut):
 *
 *   Phone path (exact, for the embedded TTS, which gives phone timings):
 *     const { phones, durationSeconds } = await synthesize({ text });            // render/tts
 *     const track = visemeTrack(phones, 25, { durationSeconds });                 // frames[k] at k / 25 s
 *
 *   Audio path (for audio without timings: an external TTS, a user's recording), streaming:
 *     const s = new AudioVisemeStream({ sampleRate: 24000, fps: 25 });
 *     for await (const chunk of audio) send(await s.push(chunk));                 // frames as they become final
 *     send(await s.end());
 *     // or, for a whole buffer: await audioToVisemeTrack(samples, sampleRate, 25)
 *     // or off the caller's event loop: (await createAudioVisemeThread()).open({ sampleRate, fps })
 *
 * The viseme set (15 classes) and its parameters: visemes.ts. Smoothing and bilabial closures: track.ts.
 * The audio model, its training data and its measured accuracy on unseen voices and sentences: README.md.
 */
export { VISEMES, VISEME_PARAMS, phoneViseme, phonesToVisemes } from './visemes.ts';
export { createAudioVisemeThread } from './thread.ts';
export type { AudioVisemeThread } from './thread.ts';
export type { TimedPhone, Viseme } from './visemes.ts';
export { visemeTrack } from './track.ts';
export type { MouthFrame } from './track.ts';
export {
  AudioVisemeStream,
  audioToVisemeTrack,
  warmUpAudioVisemes,
  releaseAudioVisemes,
  LOOKAHEAD_SECONDS,
  Resampler,
} from './audio.ts';
