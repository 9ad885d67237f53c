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
import { Resampler } from '../visemes/audio.ts';

export const MEL_SAMPLE_RATE = 16_000;
const MEL_N_FFT = 800;
const MEL_HOP = 200;
export const MEL_BANDS = 80;
export const MEL_WINDOW_FRAMES = 16;
const MEL_FMIN = 55;
const MEL_FMAX = 7600;
const MEL_FRAMES_PER_SECOND = MEL_SAMPLE_RATE / MEL_HOP; // 80
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

function hzToMel(f: number): number {
  return f < MIN_LOG_HZ ? f / F_SP : MIN_LOG_MEL + Math.log(f / MIN_LOG_HZ) / LOGSTEP;
}

function melToHz(m: number): number {
  return m < MIN_LOG_MEL ? m * F_SP : MIN_LOG_HZ * Math.exp(LOGSTEP * (m - MIN_LOG_MEL));
}

/** librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax): [nMels][1 + nFft/2]. */
function melFilterbank(
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

// --- FFT: mixed radix (4, 2, 3, 5, any), Stockham autosort (no bit reversal), for the fixed n of the STFT ---
interface FftStage {
  radix: number;
  /** cos and sin of -2 pi t u / radix, at t * radix + u. */
  c: Float64Array;
  s: Float64Array;
}

interface FftPlan {
  n: number;
  stages: FftStage[];
  /** cos and sin of -2 pi j / n. */
  cos: Float64Array;
  sin: Float64Array;
  /** The two buffers the stages go back and forth between, and one group's inputs. */
  work: Float64Array[];
  gathered: Float64Array[];
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
  const stages = factors.map((radix) => {
    const c = new Float64Array(radix * radix);
    const s = new Float64Array(radix * radix);
    for (let t = 0; t < radix; t++) {
      for (let u = 0; u < radix; u++) {
        c[t * radix + u] = Math.cos((-2 * Math.PI * ((t * u) % radix)) / radix);
        s[t * radix + u] = Math.sin((-2 * Math.PI * ((t * u) % radix)) / radix);
      }
    }
    return { radix, c, s };
  });
  const most = Math.max(4, ...factors);
  return {
    n,
    stages,
    cos,
    sin,
    work: [0, 1, 2, 3].map(() => new Float64Array(n)),
    gathered: [new Float64Array(most), new Float64Array(most)],
  };
}

/**
 * Forward DFT of (re, im) into (outRe, outIm): X[k] = sum x[j] exp(-2 pi i j k / n). Each stage of
 * radix r (the current length `len`, stride s: the radices done) takes the r inputs of a group,
 * their DFT of size r, and the twiddle exp(-2 pi i p u / len) of output u of group p, writing in
 * the order the next stage reads.
 */
export function fft(plan: FftPlan, re: Float64Array, im: Float64Array, outRe: Float64Array, outIm: Float64Array): void {
  const { n, cos, sin } = plan;
  let [xr, xi, yr, yi] = plan.work as [Float64Array, Float64Array, Float64Array, Float64Array];
  const [ar, ai] = plan.gathered as [Float64Array, Float64Array];
  xr.set(re.subarray(0, n));
  xi.set(im.subarray(0, n));
  let stride = 1;
  let len = n;
  for (const { radix: r, c, s } of plan.stages) {
    const m = len / r;
    for (let p = 0; p < m; p++) {
      for (let q = 0; q < stride; q++) {
        const o = q + stride * r * p;
        if (r === 4) {
          // The 4-point DFT needs no multiplications: sums, differences and a turn by -i.
          const i0 = q + stride * p;
          const i1 = i0 + stride * m;
          const i2 = i1 + stride * m;
          const i3 = i2 + stride * m;
          const t0r = xr[i0]! + xr[i2]!;
          const t0i = xi[i0]! + xi[i2]!;
          const t1r = xr[i0]! - xr[i2]!;
          const t1i = xi[i0]! - xi[i2]!;
          const t2r = xr[i1]! + xr[i3]!;
          const t2i = xi[i1]! + xi[i3]!;
          const t3r = xr[i1]! - xr[i3]!;
          const t3i = xi[i1]! - xi[i3]!;
          ar[0] = t0r + t2r;
          ai[0] = t0i + t2i;
          ar[1] = t1r + t3i;
          ai[1] = t1i - t3r;
          ar[2] = t0r - t2r;
          ai[2] = t0i - t2i;
          ar[3] = t1r - t3i;
          ai[3] = t1i + t3r;
          yr[o] = ar[0]!;
          yi[o] = ai[0]!;
          for (let u = 1; u < 4; u++) {
            const e = p * u * stride;
            yr[o + stride * u] = ar[u]! * cos[e]! - ai[u]! * sin[e]!;
            yi[o + stride * u] = ar[u]! * sin[e]! + ai[u]! * cos[e]!;
          }
          continue;
        }
        for (let t = 0; t < r; t++) {
          const i = q + stride * (p + t * m);
          ar[t] = xr[i]!;
          ai[t] = xi[i]!;
        }
        for (let u = 0; u < r; u++) {
          let sr = 0;
          let si = 0;
          for (let t = 0; t < r; t++) {
            const k = t * r + u;
            sr += ar[t]! * c[k]! - ai[t]! * s[k]!;
            si += ar[t]! * s[k]! + ai[t]! * c[k]!;
          }
          const e = p * u * stride;
          yr[o + stride * u] = sr * cos[e]! - si * sin[e]!;
          yi[o + stride * u] = sr * sin[e]! + si * cos[e]!;
        }
      }
    }
    [xr, xi, yr, yi] = [yr, yi, xr, xi];
    stride *= r;
    len = m;
  }
  outRe.set(xr);
  outIm.set(xi);
}

export function createFftPlan(n: number): FftPlan {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`FFT size must be a positive integer, got ${n}`);
  return planFft(n);
}

/** A mel band's filter: its non-zero weights, from FFT bin `from` on. */
interface BandFilter {
  from: number;
  weights: Float32Array;
}

interface FrontEnd {
  /** A complex FFT of half the STFT's size: a real frame's spectrum from it (realSpectrum). */
  plan: FftPlan;
  /** exp(-2 pi i k / n_fft), k < n_fft / 2. */
  twRe: Float64Array;
  twIm: Float64Array;
  window: Float64Array;
  bands: BandFilter[];
  re: Float64Array;
  im: Float64Array;
  oRe: Float64Array;
  oIm: Float64Array;
}

let cached: FrontEnd | undefined;

function frontEnd(): FrontEnd {
  if (!cached) {
    const window = new Float64Array(MEL_N_FFT);
    for (let j = 0; j < MEL_N_FFT; j++) window[j] = 0.5 - 0.5 * Math.cos((2 * Math.PI * j) / MEL_N_FFT); // periodic Hann
    // Each filter is a triangle over a few bins: summing only those gives the same sums, 30x fewer terms.
    const bands = melFilterbank().map((w) => {
      let from = w.findIndex((v) => v !== 0);
      if (from < 0) from = 0;
      let to = w.length;
      while (to > from && w[to - 1] === 0) to--;
      return { from, weights: w.slice(from, to) };
    });
    const half = MEL_N_FFT / 2;
    const n = () => new Float64Array(half + 1);
    const twRe = Float64Array.from({ length: half }, (_, k) => Math.cos((-2 * Math.PI * k) / MEL_N_FFT));
    const twIm = Float64Array.from({ length: half }, (_, k) => Math.sin((-2 * Math.PI * k) / MEL_N_FFT));
    cached = { plan: planFft(half), twRe, twIm, window, bands, re: n(), im: n(), oRe: n(), oIm: n() };
  }
  return cached;
}

/**
 * One column of the spectrogram: the STFT frame whose 800 pre-emphasised samples `at(0..799)`
 * gives (unwindowed), through the mel filters, dB and normalisation, into data[b * frames + t].
 */
function melColumn(at: (j: number) => number, data: Float32Array, t: number, frames: number): void {
  const { plan, twRe, twIm, window, bands, re, im, oRe, oIm } = frontEnd();
  const half = MEL_N_FFT / 2;
  // The real frame as a complex one of half the length (even samples real, odd imaginary)...
  for (let j = 0; j < half; j++) {
    re[j] = at(2 * j) * window[2 * j]!;
    im[j] = at(2 * j + 1) * window[2 * j + 1]!;
  }
  fft(plan, re, im, oRe, oIm);
  // ...whose spectrum Z gives the real frame's: X[k] = E[k] + W^k O[k], with E and O the halves' spectra.
  const mag = re;
  for (let k = 0; k <= half; k++) {
    const a = k % half;
    const b = (half - k) % half;
    const er = (oRe[a]! + oRe[b]!) / 2;
    const ei = (oIm[a]! - oIm[b]!) / 2;
    const or = (oIm[a]! + oIm[b]!) / 2;
    const oi = (oRe[b]! - oRe[a]!) / 2;
    const wr = k < half ? twRe[k]! : -1;
    const wi = k < half ? twIm[k]! : 0;
    const xr = er + wr * or - wi * oi;
    const xi = ei + wr * oi + wi * or;
    mag[k] = Math.sqrt(xr * xr + xi * xi);
  }
  for (let b = 0; b < MEL_BANDS; b++) {
    const { from, weights } = bands[b]!;
    let s = 0;
    for (let k = 0; k < weights.length; k++) s += weights[k]! * mag[from + k]!;
    const db = 20 * Math.log10(Math.max(1e-5, s)) - REF_LEVEL_DB;
    const v = 2 * MAX_ABS * ((db - MIN_LEVEL_DB) / -MIN_LEVEL_DB) - MAX_ABS;
    data[b * frames + t] = Math.min(MAX_ABS, Math.max(-MAX_ABS, v));
  }
}

/** Wav2Lip's normalised log-mel spectrogram of 16 kHz mono samples. */
export function melSpectrogram(samples: Float32Array): MelSpectrogram {
  if (samples.length === 0) return { data: new Float32Array(0), frames: 0 };
  const n = samples.length;
  const y = new Float64Array(n);
  y[0] = samples[0]!;
  for (let i = 1; i < n; i++) y[i] = samples[i]! - PREEMPHASIS * samples[i - 1]!;
  const pad = MEL_N_FFT / 2;
  // numpy 'reflect' padding (edge sample not repeated); short signals reflect back and forth
  const reflect = (i: number): number => {
    if (n === 1) return y[0]!;
    const period = 2 * (n - 1);
    let j = i % period;
    if (j < 0) j += period;
    return y[j < n ? j : period - j]!;
  };
  const frames = 1 + Math.floor(n / MEL_HOP);
  const data = new Float32Array(MEL_BANDS * frames);
  for (let t = 0; t < frames; t++) {
    const start = t * MEL_HOP - pad;
    melColumn((j) => reflect(start + j), data, t, frames);
  }
  return { data, frames };
}

/**
 * The [80, 16] window for video frame `frameIndex` at `fps` (Wav2Lip's
 * indexing), band major. Spectrograms shorter than 16 frames are padded with
 * the floor value (-4, silence).
 */
export function melWindow(
  mel: MelSpectrogram,
  frameIndex: number,
  fps: number,
  out = new Float32Array(MEL_BANDS * MEL_WINDOW_FRAMES),
): Float32Array {
  if (!(fps > 0)) throw new RangeError(`fps must be positive, got ${fps}`);
  if (!Number.isInteger(frameIndex) || frameIndex < 0)
    throw new RangeError(`frameIndex must be a non-negative integer, got ${frameIndex}`);
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

/**
 * The audio of a stretch of a timeline (a live call's, at the call's rate) that one video frame's
 * mel window reads: the window is computed from it as Wav2Lip computes it from a whole recording,
 * with the real audio on either side of the window in place of the STFT's padding.
 */
export interface FrameAudio {
  /** Timeline samples from frameAudioSpan(frame, fps, sampleRate).start on, at least its `length`. */
  pcm: Int16Array;
  sampleRate: number;
  /** The video frame, numbered on the same timeline (frame 0 at sample 0). */
  frame: number;
  fps: number;
}

/** 16 kHz samples past either end of a window's audio that the resampler's taps reach (its 16 zero crossings, with room). */
const RESAMPLE_MARGIN = 32;

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/** The first 16 kHz sample of frame `frame`'s window audio: one before the first STFT frame's reach (pre-emphasis needs it). */
function windowAudioStart(frame: number, fps: number): number {
  return Math.floor((MEL_FRAMES_PER_SECOND * frame) / fps) * MEL_HOP - MEL_N_FFT / 2 - 1;
}
/** 16 kHz samples of a window's audio: 16 STFT frames of 800, 200 apart, and the one before. */
const WINDOW_AUDIO = (MEL_WINDOW_FRAMES - 1) * MEL_HOP + MEL_N_FFT + 1;

/**
 * The samples [start, start + length) of a timeline at `sampleRate` that frame `frame`'s window
 * reads (`length` is the same for every frame at a rate). Samples before 0 read as silence.
 */
export function frameAudioSpan(frame: number, fps: number, sampleRate: number): { start: number; length: number } {
  if (!(fps > 0)) throw new RangeError(`fps must be positive, got ${fps}`);
  if (!Number.isInteger(sampleRate) || sampleRate < 8000)
    throw new RangeError(`sampleRate must be an integer of at least 8000, got ${sampleRate}`);
  const n0 = windowAudioStart(frame, fps);
  if (sampleRate === MEL_SAMPLE_RATE) return { start: n0, length: WINDOW_AUDIO };
  // Resampled from a 16 kHz sample whose time is a whole sample at the timeline's rate, so every output lands on the 16 kHz grid.
  const q = MEL_SAMPLE_RATE / gcd(sampleRate, MEL_SAMPLE_RATE);
  const a16 = Math.floor((n0 - RESAMPLE_MARGIN) / q) * q;
  const length = Math.ceil(((WINDOW_AUDIO + 2 * RESAMPLE_MARGIN + q) * sampleRate) / MEL_SAMPLE_RATE) + 1;
  return { start: (a16 * sampleRate) / MEL_SAMPLE_RATE, length };
}

/**
 * Frame `audio.frame`'s [80, 16] window (as melWindow cuts it from the whole recording's
 * spectrogram), from the audio around it (frameAudioSpan): resampled to 16 kHz where needed, then
 * Wav2Lip's front-end on just those 16 STFT frames.
 */
export function melWindowOfAudio(
  audio: FrameAudio,
  out = new Float32Array(MEL_BANDS * MEL_WINDOW_FRAMES),
): Float32Array {
  const { pcm, sampleRate, frame, fps } = audio;
  if (!Number.isInteger(frame) || frame < 0) throw new RangeError(`frame must be a non-negative integer, got ${frame}`);
  const span = frameAudioSpan(frame, fps, sampleRate);
  if (pcm.length < span.length)
    throw new RangeError(
      `frame ${frame}'s audio has ${pcm.length} samples; its window reads ${span.length} (frameAudioSpan)`,
    );
  let y: Float32Array;
  if (sampleRate === MEL_SAMPLE_RATE) {
    y = new Float32Array(WINDOW_AUDIO);
    for (let i = 0; i < WINDOW_AUDIO; i++) y[i] = pcm[i]! / 32768;
  } else {
    const f = new Float32Array(span.length);
    for (let i = 0; i < span.length; i++) f[i] = pcm[i]! / 32768;
    const from = windowAudioStart(frame, fps) - (span.start * MEL_SAMPLE_RATE) / sampleRate;
    y = new Resampler(sampleRate).push(f, true).subarray(from, from + WINDOW_AUDIO);
  }
  for (let t = 0; t < MEL_WINDOW_FRAMES; t++) {
    const first = 1 + t * MEL_HOP;
    melColumn((j) => y[first + j]! - PREEMPHASIS * y[first + j - 1]!, out, t, MEL_WINDOW_FRAMES);
  }
  return out;
}
