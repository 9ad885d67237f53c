/**
 * Writes the audio-to-viseme training and evaluation data: every corpus sentence spoken by every Flite
 * voice (through render/tts, the product's own TTS), with per-10-ms labels computed by the product's own
 * phone path (render/visemes), so labels and the phone path can never disagree.
 *
 *   npx tsx render/models/build/visemes/gen_data.ts [OUT_DIR]      (default /tmp/visemes-data)
 *
 * OUT_DIR/<voice>-<split>-<speed>-<n>.pcm  int16 little-endian mono at the voice's sample rate
 * OUT_DIR/index.jsonl                      one line per utterance: file, voice, split, speed, f0, sampleRate,
 *                                          samples, viseme (index into VISEMES per 10 ms, sample i at i/100 s),
 *                                          open (the phone path's smoothed open curve, same times)
 */
import { mkdirSync, writeFileSync, appendFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { FLITE_OUT_WAV, FliteEngine } from '../../../tts/flite.ts';
import { parsePhoneTimings, parseWav } from '../../../tts/synth.ts';
import type { Voice } from '../../../tts/index.ts';
import { phonesToVisemes } from '../../../visemes/visemes.ts';
import { segmentCurves } from '../../../visemes/track.ts';
import { HELDOUT_SENTENCES, TRAIN_SENTENCES } from './corpus.ts';

const out = process.argv[2] ?? '/tmp/visemes-data';
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const index = path.join(out, 'index.jsonl');

// Training voices speak the training sentences at three speaking rates; every voice (slt never trained on)
// speaks the held-out sentences and, for the unseen-voice figure, the training sentences at rate 1.
// The diphone voice also speaks them at raised pitch (flite's int_f0_target_mean; kal's own is about 105 Hz):
// the clustergen voices ignore pitch settings, and all training voices are male.
const jobs: { voice: Voice; split: 'train' | 'heldout'; speed: number; f0?: number; sentences: readonly string[] }[] =
  [];
for (const voice of ['kal16', 'awb', 'rms', 'kal'] as Voice[]) {
  for (const speed of voice === 'kal' ? [1] : [0.85, 1, 1.2])
    jobs.push({ voice, split: 'train', speed, sentences: TRAIN_SENTENCES });
}
for (const f0 of [150, 190, 230])
  jobs.push({ voice: 'kal16', split: 'train', speed: 1, f0, sentences: TRAIN_SENTENCES });
for (const voice of ['slt', 'kal16', 'awb', 'rms'] as Voice[])
  jobs.push({ voice, split: 'heldout', speed: 1, sentences: HELDOUT_SENTENCES });
jobs.push({ voice: 'slt', split: 'train', speed: 1, sentences: TRAIN_SENTENCES });

const engine = new FliteEngine();
// duration_stretch is always set to 1 / speed, so kal16's "x1" runs 10% faster than its default (1.1): one more rate.
async function speak(text: string, voice: Voice, speed: number, f0?: number) {
  const args = ['-voice', voice, '-psdur', '--setf', `duration_stretch=${1 / speed}`];
  if (f0) args.push('--setf', `int_f0_target_mean=${f0}`);
  const run = await engine.run([...args, '-t', text, '-o', FLITE_OUT_WAV]);
  if (run.exitCode !== 0 || !run.wav) throw new Error(`flite failed: ${run.stderr}`);
  const { sampleRate, samples } = parseWav(run.wav);
  const durationSeconds = samples.length / sampleRate;
  return { sampleRate, samples, durationSeconds, phones: parsePhoneTimings(run.stdout, durationSeconds) };
}

let total = 0;
for (const job of jobs) {
  for (let n = 0; n < job.sentences.length; n++) {
    const text = job.sentences[n] as string;
    const r = await speak(text, job.voice, job.speed, job.f0);
    const curves = segmentCurves(phonesToVisemes(r.phones), r.durationSeconds);
    const file = `${job.voice}-${job.split}-${job.speed}-${job.f0 ?? 0}-${n}.pcm`;
    writeFileSync(path.join(out, file), new Uint8Array(r.samples.buffer, r.samples.byteOffset, r.samples.byteLength));
    const line = {
      file,
      voice: job.voice,
      split: job.split,
      speed: job.speed,
      f0: job.f0 ?? null,
      sentence: n,
      sampleRate: r.sampleRate,
      samples: r.samples.length,
      viseme: Array.from(curves.viseme),
      open: Array.from(curves.open, (v) => Math.round(v * 1e4) / 1e4),
    };
    appendFileSync(index, `${JSON.stringify(line)}\n`);
    total += r.durationSeconds;
  }
  process.stdout.write(
    `${job.voice} ${job.split} x${job.speed} f0 ${job.f0 ?? 'own'}: ${job.sentences.length} sentences, ${(total / 60).toFixed(1)} min so far\n`,
  );
}
await engine.close();
