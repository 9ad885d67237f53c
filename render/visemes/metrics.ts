/**
 * How well the audio path matches the phone path on the same speech: the measure used by
 * render/models/build/visemes/evaluate.ts (the figures in README.md) and by the floor in audio.test.ts.
 * Both tracks are taken at 100 fps, where each video frame is one 10 ms control sample.
 */
import type { MouthFrame } from './track.ts';
import { visemeTrack } from './track.ts';
import type { TimedPhone } from './visemes.ts';
import { AudioVisemeStream, audioToVisemeTrack } from './audio.ts';

export interface AudioVisemeScore {
  frames: number;
  /** Fraction of 10 ms frames whose most likely viseme (of 15) is the phone path's. */
  accuracy: number;
  /** Same, over frames where the phone path is not silence. */
  speechAccuracy: number;
  /** Pearson correlation of the audio path's `open` with the phone path's. */
  openCorrelation: number;
  /** Mean absolute difference of `open`. */
  openMae: number;
}

export interface ScoredUtterance {
  reference: MouthFrame[];
  predicted: MouthFrame[];
}

/** Phone-path reference and audio-path prediction at 100 fps, streamed in `chunkMs` chunks. */
export async function scoreUtterance(
  samples: Int16Array,
  sampleRate: number,
  phones: readonly TimedPhone[],
  chunkMs = 20,
): Promise<ScoredUtterance> {
  const durationSeconds = samples.length / sampleRate;
  const reference = visemeTrack(phones, 100, { durationSeconds }).frames;
  const stream = new AudioVisemeStream({ sampleRate, fps: 100 });
  const predicted: MouthFrame[] = [];
  const step = Math.max(1, Math.round((chunkMs / 1000) * sampleRate));
  if (chunkMs > 0) {
    for (let i = 0; i < samples.length; i += step)
      predicted.push(...(await stream.push(samples.subarray(i, i + step))));
    predicted.push(...(await stream.end()));
  } else {
    predicted.push(...(await audioToVisemeTrack(samples, sampleRate, 100)).frames);
  }
  return { reference, predicted };
}

/** Pools utterances into one score. */
export function score(utterances: readonly ScoredUtterance[]): AudioVisemeScore {
  let n = 0;
  let hit = 0;
  let speech = 0;
  let speechHit = 0;
  const a: number[] = [];
  const b: number[] = [];
  for (const u of utterances) {
    const len = Math.min(u.reference.length, u.predicted.length);
    for (let i = 0; i < len; i++) {
      const r = u.reference[i] as MouthFrame;
      const p = u.predicted[i] as MouthFrame;
      n++;
      if (r.viseme === p.viseme) hit++;
      if (r.viseme !== 'sil') {
        speech++;
        if (r.viseme === p.viseme) speechHit++;
      }
      a.push(r.open);
      b.push(p.open);
    }
  }
  const mean = (x: number[]) => x.reduce((s, v) => s + v, 0) / Math.max(1, x.length);
  const ma = mean(a);
  const mb = mean(b);
  let sab = 0;
  let saa = 0;
  let sbb = 0;
  let mae = 0;
  for (let i = 0; i < a.length; i++) {
    const da = (a[i] as number) - ma;
    const db = (b[i] as number) - mb;
    sab += da * db;
    saa += da * da;
    sbb += db * db;
    mae += Math.abs((a[i] as number) - (b[i] as number));
  }
  return {
    frames: n,
    accuracy: hit / Math.max(1, n),
    speechAccuracy: speechHit / Math.max(1, speech),
    openCorrelation: saa > 0 && sbb > 0 ? sab / Math.sqrt(saa * sbb) : 0,
    openMae: mae / Math.max(1, a.length),
  };
}
