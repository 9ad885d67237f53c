import { normalizeText } from './synth.ts';

/**
 * An upper bound of how long the embedded TTS takes to speak `text`, in seconds, from the text
 * alone (what a turn reserves before any speech exists). Measured against every voice: plain words
 * run about 0.06-0.08 s a letter, spelled-out capitals (NASA, FBI) about 0.3, digits up to 0.6
 * (1234567890 is read as a number), symbols read as words ($, %, &) about 0.3; each sentence adds a pause.
 * The figures here are above all of those, so the speech never outruns the estimate in practice
 * (tts.test.ts checks a set of hard cases on every voice).
 */
export function estimateSpeechSeconds(text: string): number {
  const t = normalizeText(text);
  let seconds = 1;
  for (const run of t.match(/[A-Z]{2,}/g) ?? []) seconds += 0.35 * run.length;
  const lowerOrSingle = t.replace(/[A-Z]{2,}/g, '');
  seconds += 0.09 * (lowerOrSingle.match(/[A-Za-z]/g) ?? []).length;
  seconds += 0.6 * (t.match(/[0-9]/g) ?? []).length;
  seconds += 0.35 * (t.match(/[^A-Za-z0-9\s]/g) ?? []).length;
  seconds += 0.3 * (t.match(/[.!?;:]+(\s|$)/g) ?? []).length;
  return seconds;
}
