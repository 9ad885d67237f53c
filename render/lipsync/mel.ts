/**
 * Wav2Lip's audio front-end in TypeScript: the normalised log-mel spectrogram
 * of `audio.melspectrogram` (Wav2Lip's audio.py with its hparams.py), and the
 * 16-frame window a video frame is paired with.
 *
 * Exactly, for 16 kHz mono float samples x in [-1, 1]:
 *   1. pre-emphasis   y[n] = x[n] - 0.97 x[n-1]   (y[0] = x[0])
 *   2. STFT           n_fft = 800 (50 ms), hop 200 (12.5 ms, so 80 frames per second),
 *                     periodic Hann window of 800, centred frames: the signal is
 *                     reflect-padded by 400 on each side (librosa 0.7, center=True),
 *                     T = 1 + floor(len / 200) frames; magnitude |X|
 *   3. mel            80 Slaney-style triangular filters (librosa.filters.mel, htk=False,
 *                     norm='slaney'), 55 Hz to 7600 Hz
 *   4. dB             20 log10(max(1e-5, m)) - 20   (ref_level_db = 20)
 *   5. normalise      clip(8 (db + 100) / 100 - 4, -4, 4)   (symmetric, max_abs_value 4)
 * Result: [80, T], mel band major (band b, frame t at b * T + t).
 *
 * Window for video frame i at `fps` (Wav2Lip's inference.py): start = floor(80 i / fps);
 * frames start .. start+15 (200 ms from the frame's time onwards); past the end,
 * the last 16 frames. Fed to the model as [1, 80, 16].
 */

export const MEL_SAMPLE_RATE = 16_000;
export const MEL_N_FFT = 800;
export const MEL_HOP = 200;
export const MEL_BANDS = 80;
export const MEL_WINDOW_FRAMES = 16;
export const MEL_FMIN = 55;
export const MEL_FMAX = 7600;
export const MEL_FRAMES_PER_SECOND = MEL_SAMPLE_RATE / MEL_HOP; // 80
const PREEMPHASIS = 0.97;
const REF_LEVEL_DB = 20;
const MIN_LEVEL_DB = -100;
const MAX_ABS = 4;

export interface MelSpectrogram {
  /** [MEL_BANDS * frames], band major. */
  data: Float32Array;
  frames: number;
}

// --- Slaney mel scale (librosa.hz_to_mel / mel_to_hz with htk=False) ---
const F_SP = 200 / 3;
const MIN_LOG_HZ = 1000;
const MIN_LOG_MEL = MIN_LOG_HZ / F_SP;
const LOGSTEP = Math.log(6.4) / 27;

export function hzToMel(f: number): number {
  return f < MIN_LOG_HZ ? f / F_SP : MIN_LOG_MEL + Math.log(f / MIN_LOG_HZ) / LOGSTEP;
}

export function melToHz(m: number): number {
  return m < MIN_LOG_MEL ? m * F_SP : MIN_LOG_HZ * Math.exp(LOGSTEP * (m - MIN_LOG_MEL));
}

/** librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax): [nMels][1 + nFft/2]. */
export function melFilterbank(
  sr = MEL_SAMPLE_RATE,
  nFft = MEL_N_FFT,
  nMels = MEL_BANDS,
  fmin = MEL_FMIN,
  fmax = MEL_FMAX,
): Float32Array[] {
  const bins = 1 + Math.floor(nFft / 2);
  const fftFreqs = Array.from({ length: bins }, (_, k) => (k * sr) / nFft);
  const lo = hzToMel(fmin);
  const hi = hzToMel(fmax);
  const melF = Array.from({ length: nMels + 2 }, (_, i) => melToHz(lo + ((hi - lo) * i) / (nMels + 1)));
  const filters: Float32Array[] = [];
  for (let i = 0; i < nMels; i++) {
    const w = new Float32Array(bins);
    const d0 = melF[i + 1]! - melF[i]!;
    const d1 = melF[i + 2]! - melF[i + 1]!;
    const enorm = 2 / (melF[i + 2]! - melF[i]!);
    for (let k = 0; k < bins; k++) {
      const lower = (fftFreqs[k]! - melF[i]!) / d0;
      const upper = (melF[i + 2]! - fftFreqs[k]!) / d1;
      w[k] = Math.max(0, Math.min(lower, upper)) * enorm;
    }
    filters.push(w);
  }
  return filters;
}

// --- FFT: mixed radix (2, 3, 5, any), recursive decimation in time, for the fixed n of the STFT ---
interface FftPlan {
  n: number;
  factors: number[];
  cos: Float64Array;
  sin: Float64Array;
}

function planFft(n: number): FftPlan {
  const factors: number[] = [];
  let m = n;
  for (const p of [4, 2, 3, 5]) {
    while (m % p === 0) {
      factors.push(p);
      m /= p;
    }
  }
  for (let p = 7; m > 1; p += 2) {
    while (m % p === 0) {
      factors.push(p);
      m /= p;
    }
  }
  const cos = new Float64Array(n);
  const sin = new Float64Array(n);
  for (let j = 0; j < n; j++) {
    cos[j] = Math.cos((-2 * Math.PI * j) / n);
    sin[j] = Math.sin((-2 * Math.PI * j) / n);
  }
  return { n, factors, cos, sin };
}

/** Forward DFT of (re, im) into (outRe, outIm): X[k] = sum x[j] exp(-2 pi i j k / n). */
export function fft(plan: FftPlan, re: Float64Array, im: Float64Array, outRe: Float64Array, outIm: Float64Array): void {
  const tRe = new Float64Array(8);
  const tIm = new Float64Array(8);
  const rec = (inOff: number, stride: number, outOff: number, n: number, fi: number): void => {
    if (n === 1) {
      outRe[outOff] = re[inOff]!;
      outIm[outOff] = im[inOff]!;
      return;
    }
    const p = plan.factors[fi]!;
    const m = n / p;
    for (let q = 0; q < p; q++) rec(inOff + q * stride, stride * p, outOff + q * m, m, fi + 1);
    const N = plan.n;
    const tw = N / n; // index step of this level's twiddles in the full table
    const tr = p <= 8 ? tRe : new Float64Array(p);
    const ti = p <= 8 ? tIm : new Float64Array(p);
    for (let k = 0; k < m; k++) {
      for (let q = 0; q < p; q++) {
        const j = outOff + q * m + k;
        const e = ((q * k * tw) % N) | 0;
        const c = plan.cos[e]!;
        const s = plan.sin[e]!;
        tr[q] = outRe[j]! * c - outIm[j]! * s;
        ti[q] = outRe[j]! * s + outIm[j]! * c;
      }
      for (let u = 0; u < p; u++) {
        let sr = 0;
        let si = 0;
        for (let q = 0; q < p; q++) {
          const e = ((q * u * m * tw) % N) | 0;
          const c = plan.cos[e]!;
          const s = plan.sin[e]!;
          sr += tr[q]! * c - ti[q]! * s;
          si += tr[q]! * s + ti[q]! * c;
        }
        outRe[outOff + u * m + k] = sr;
        outIm[outOff + u * m + k] = si;
      }
    }
  };
  rec(0, 1, 0, plan.n, 0);
}

export function createFftPlan(n: number): FftPlan {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`FFT size must be a positive integer, got ${n}`);
  return planFft(n);
}

let cached: { plan: FftPlan; window: Float64Array; filters: Float32Array[] } | undefined;

function frontEnd(): { plan: FftPlan; window: Float64Array; filters: Float32Array[] } {
  if (!cached) {
    const window = new Float64Array(MEL_N_FFT);
    for (let j = 0; j < MEL_N_FFT; j++) window[j] = 0.5 - 0.5 * Math.cos((2 * Math.PI * j) / MEL_N_FFT); // periodic Hann
    cached = { plan: planFft(MEL_N_FFT), window, filters: melFilterbank() };
  }
  return cached;
}

/** Wav2Lip's normalised log-mel spectrogram of 16 kHz mono samples. */
export function melSpectrogram(samples: Float32Array): MelSpectrogram {
  if (samples.length === 0) return { data: new Float32Array(0), frames: 0 };
  const { plan, window, filters } = frontEnd();
  const n = samples.length;
  const y = new Float64Array(n);
  y[0] = samples[0]!;
  for (let i = 1; i < n; i++) y[i] = samples[i]! - PREEMPHASIS * samples[i - 1]!;
  const pad = MEL_N_FFT / 2;
  // numpy 'reflect' padding (edge sample not repeated); short signals reflect back and forth
  const at = (i: number): number => {
    if (n === 1) return y[0]!;
    const period = 2 * (n - 1);
    let j = i % period;
    if (j < 0) j += period;
    return y[j < n ? j : period - j]!;
  };
  const frames = 1 + Math.floor(n / MEL_HOP);
  const bins = MEL_N_FFT / 2 + 1;
  const re = new Float64Array(MEL_N_FFT);
  const im = new Float64Array(MEL_N_FFT);
  const oRe = new Float64Array(MEL_N_FFT);
  const oIm = new Float64Array(MEL_N_FFT);
  const mag = new Float64Array(bins);
  const data = new Float32Array(MEL_BANDS * frames);
  for (let t = 0; t < frames; t++) {
    const start = t * MEL_HOP - pad;
    for (let j = 0; j < MEL_N_FFT; j++) {
      re[j] = at(start + j) * window[j]!;
      im[j] = 0;
    }
    fft(plan, re, im, oRe, oIm);
    for (let k = 0; k < bins; k++) mag[k] = Math.hypot(oRe[k]!, oIm[k]!);
    for (let b = 0; b < MEL_BANDS; b++) {
      const f = filters[b]!;
      let s = 0;
      for (let k = 0; k < bins; k++) s += f[k]! * mag[k]!;
      const db = 20 * Math.log10(Math.max(1e-5, s)) - REF_LEVEL_DB;
      const v = 2 * MAX_ABS * ((db - MIN_LEVEL_DB) / -MIN_LEVEL_DB) - MAX_ABS;
      data[b * frames + t] = Math.min(MAX_ABS, Math.max(-MAX_ABS, v));
    }
  }
  return { data, frames };
}

/**
 * The [80, 16] window for video frame `frameIndex` at `fps` (Wav2Lip's
 * indexing), band major. Spectrograms shorter than 16 frames are padded with
 * the floor value (-4, silence).
 */
export function melWindow(mel: MelSpectrogram, frameIndex: number, fps: number, out = new Float32Array(MEL_BANDS * MEL_WINDOW_FRAMES)): Float32Array {
  if (!(fps > 0)) throw new RangeError(`fps must be positive, got ${fps}`);
  if (!Number.isInteger(frameIndex) || frameIndex < 0) throw new RangeError(`frameIndex must be a non-negative integer, got ${frameIndex}`);
  let start = Math.floor((MEL_FRAMES_PER_SECOND * frameIndex) / fps);
  if (start + MEL_WINDOW_FRAMES > mel.frames) start = Math.max(0, mel.frames - MEL_WINDOW_FRAMES);
  for (let b = 0; b < MEL_BANDS; b++) {
    for (let t = 0; t < MEL_WINDOW_FRAMES; t++) {
      const src = start + t;
      out[b * MEL_WINDOW_FRAMES + t] = src < mel.frames ? mel.data[b * mel.frames + src]! : -MAX_ABS;
    }
  }
  return out;
}
