/**
 * Measures the audio path (render/models/visemes/audio_visemes.onnx through AudioVisemeStream, streamed in
 * 20 ms chunks) against the phone path on speech synthesized now by the product's TTS, on sentences and a
 * voice the model never saw. Prints the table recorded in render/visemes/README.md.
 *
 *   npx tsx render/models/build/visemes/evaluate.ts
 */
import { closeTts, synthesize } from '../../../tts/index.ts';
import type { Voice } from '../../../tts/index.ts';
import { releaseAudioVisemes } from '../../../visemes/audio.ts';
import { score, scoreUtterance } from '../../../visemes/metrics.ts';
import type { ScoredUtterance } from '../../../visemes/metrics.ts';
import { HELDOUT_SENTENCES, TRAIN_SENTENCES } from './corpus.ts';

const sets: { name: string; voice: Voice; sentences: readonly string[] }[] = [
  { name: 'slt (unseen voice), held-out sentences', voice: 'slt', sentences: HELDOUT_SENTENCES },
  { name: 'slt (unseen voice), training sentences', voice: 'slt', sentences: TRAIN_SENTENCES.slice(0, 64) },
  { name: 'kal16 (trained voice), held-out sentences', voice: 'kal16', sentences: HELDOUT_SENTENCES },
  { name: 'awb (trained voice), held-out sentences', voice: 'awb', sentences: HELDOUT_SENTENCES },
  { name: 'rms (trained voice), held-out sentences', voice: 'rms', sentences: HELDOUT_SENTENCES },
  { name: 'kal 8 kHz (trained voice), held-out sentences', voice: 'kal', sentences: HELDOUT_SENTENCES },
];

const pct = (v: number) => `${(100 * v).toFixed(1)}%`;
process.stdout.write(
  '| set | frames | viseme accuracy (15 classes) | accuracy on speech frames | open: correlation | open: MAE | always-majority baseline |\n|---|---|---|---|---|---|---|\n',
);
for (const set of sets) {
  const utts: ScoredUtterance[] = [];
  const counts = new Map<string, number>();
  for (const text of set.sentences) {
    const r = await synthesize({ text, voice: set.voice });
    const u = await scoreUtterance(r.samples, r.sampleRate, r.phones, 20);
    for (const f of u.reference) counts.set(f.viseme, (counts.get(f.viseme) ?? 0) + 1);
    utts.push(u);
  }
  const s = score(utts);
  const majority = Math.max(...counts.values()) / [...counts.values()].reduce((a, b) => a + b, 0);
  process.stdout.write(
    `| ${set.name} | ${s.frames} | ${pct(s.accuracy)} | ${pct(s.speechAccuracy)} | ${s.openCorrelation.toFixed(3)} | ${s.openMae.toFixed(3)} | ${pct(majority)} |\n`,
  );
}
await closeTts();
await releaseAudioVisemes();
