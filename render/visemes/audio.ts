/**
 * The audio path: mouth parameters from speech audio alone, for audio that comes without phone timings
 * (an external TTS, a user's recording for lip sync).
 *
 * render/models/visemes/audio_visemes.onnx takes raw 16 kHz audio and gives viseme probabilities every
 * 10 ms; the feature extraction (STFT as a strided convolution, mel filterbank, log, normalisation) is inside
 * the graph, so nothing here computes features. It sees 200 ms of past audio and 40 ms ahead. How it was
 * trained and how well it does on voices and sentences it never saw: README.md.
 *
 * Streaming: AudioVisemeStream takes chunks of any size as they arrive and returns the video frames that
 * are final. A frame at time t is out once audio up to t + LOOKAHEAD_SECONDS (+ at most 10 ms of control
 * interpolation) has been pushed; each chunk reuses the features of the previous ones, so each 10 ms of
 * audio is analysed once.
 */
import { fileURLToPath } from 'node:url';
import * as ort from '../onnx/runtime.ts';
import { loadedOnce, sessionOptions } from '../onnx/session.ts';
import type { MouthFrame, ParamCurves, SmoothingOptions } from './track.ts';
import { CONTROL_RATE, emptyCurves, sampleCurves, smoothCausal, speakingEnvelope } from './track.ts';
import type { Viseme } from './visemes.ts';
import { MOUTH_PARAM_KEYS, VISEMES, VISEME_PARAMS } from './visemes.ts';

const AUDIO_MODEL_PATH = fileURLToPath(new URL('../models/visemes/audio_visemes.onnx', import.meta.url));

/** The model's contract (also in the .onnx metadata). */
const MODEL_SAMPLE_RATE = 16000;
const HOP = 160;
const WIN = 400;
const PAST = 20;
const AHEAD = 4;
const K = PAST + 1 + AHEAD;
const LEFT_PAD = PAST * HOP + WIN / 2;

/** Audio needed beyond a frame's time before the model can classify it (4 frames ahead + half a window). */
export const LOOKAHEAD_SECONDS = (AHEAD * HOP + WIN / 2) / MODEL_SAMPLE_RATE;

/**
 * The audio path smooths causally only (no anticipation pass): it cannot see further than the model does.
 * Chosen on the validation voice of a leave-awb-out model (README.md), never on the held-out sets.
 */
const AUDIO_SMOOTHING: Readonly<Pick<SmoothingOptions, 'attack' | 'release'>> = { attack: 0.01, release: 0.02 };

const session = loadedOnce(
  () => ort.InferenceSession.create(AUDIO_MODEL_PATH, sessionOptions('cpu', 1)),
  (s) => s.release(),
);

/** The shared session, loaded once per process on first use. */
export function audioVisemeSession(): Promise<ort.InferenceSession> {
  return session.get();
}

/** Feature channels of the model (its `context` input is [batch, channels, frames]). */
function featureChannels(session: ort.InferenceSession): number {
  const meta = session.inputMetadata.find((m) => m.name === 'context');
  const c = meta && meta.isTensor ? meta.shape[1] : undefined;
  if (typeof c !== 'number' || !(c > 0))
    throw new Error('audio_visemes.onnx: no fixed channel count on input "context"');
  return c;
}

/** Loads the model now so the first stream does not pay for it. */
export async function warmUpAudioVisemes(): Promise<void> {
  await audioVisemeSession();
}

export function releaseAudioVisemes(): Promise<void> {
  return session.release();
}

/** Kernels precomputed for at most this many sub-sample phases (any common rate has at most 160). */
const MAX_PHASES = 1024;

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/**
 * Streaming sample-rate converter to 16 kHz: windowed-sinc interpolation (Blackman, 16 zero crossings),
 * low-passed at the lower Nyquist. Exact pass-through at 16 kHz. Also used for the mel input of a
 * neural lip-sync model (16 kHz too).
 *
 * Output sample n sits at input position n * inRate / 16000, whose fraction takes 16000 / gcd(inRate,
 * 16000) values (2 from 24 kHz, 160 from 44.1 kHz): one normalised kernel per value is computed once,
 * so each output sample is one dot product.
 */
export class Resampler {
  private readonly cutoff: number; // fraction of the input Nyquist
  private readonly half: number; // taps on each side, in input samples
  private readonly phases: number; // distinct fractional positions
  private readonly kernels: Float32Array | null; // [phases][2 * half], normalised; null: computed per sample
  private buf = new Float32Array(0);
  private bufStart = 0; // absolute input index of buf[0]
  private produced = 0; // output samples so far

  constructor(readonly inRate: number) {
    this.cutoff = Math.min(1, MODEL_SAMPLE_RATE / inRate);
    this.half = Math.ceil(16 / this.cutoff);
    this.phases = MODEL_SAMPLE_RATE / gcd(inRate, MODEL_SAMPLE_RATE);
    this.kernels = inRate !== MODEL_SAMPLE_RATE && this.phases <= MAX_PHASES ? this.buildKernels() : null;
  }

  push(x: Float32Array, final = false): Float32Array {
    if (this.inRate === MODEL_SAMPLE_RATE) return x;
    const merged = new Float32Array(this.buf.length + x.length + (final ? this.half + 1 : 0));
    merged.set(this.buf);
    merged.set(x, this.buf.length);
    this.buf = merged;
    const end = this.bufStart + this.buf.length; // absolute index just past the data
    const taps = 2 * this.half;
    const out: number[] = [];
    for (;;) {
      const num = this.produced * this.inRate;
      const c = Math.floor(num / MODEL_SAMPLE_RATE);
      const rem = num - c * MODEL_SAMPLE_RATE;
      if (c + rem / MODEL_SAMPLE_RATE + this.half >= end) break;
      const first = c - this.half + 1; // absolute index of the first tap
      let acc = 0;
      if (this.kernels) {
        const k = ((rem * this.phases) / MODEL_SAMPLE_RATE) * taps;
        const from = first - this.bufStart;
        if (from >= 0) {
          for (let j = 0; j < taps; j++) acc += this.buf[from + j]! * this.kernels[k + j]!;
        } else {
          for (let j = -from; j < taps; j++) acc += this.buf[from + j]! * this.kernels[k + j]!;
        }
      } else {
        acc = this.direct(c + rem / MODEL_SAMPLE_RATE, first);
      }
      out.push(acc);
      this.produced++;
    }
    const next = Math.floor((this.produced * this.inRate) / MODEL_SAMPLE_RATE);
    const keepFrom = Math.max(this.bufStart, next - this.half);
    this.buf = this.buf.slice(keepFrom - this.bufStart);
    this.bufStart = keepFrom;
    return Float32Array.from(out);
  }

  /** Weight of the input sample at distance d (input samples) from the output position, unnormalised. */
  private weight(d: number): number {
    const w = 0.42 + 0.5 * Math.cos((Math.PI * d) / this.half) + 0.08 * Math.cos((2 * Math.PI * d) / this.half);
    const a = Math.PI * d * this.cutoff;
    return (a === 0 ? 1 : Math.sin(a) / a) * w;
  }

  private buildKernels(): Float32Array {
    const taps = 2 * this.half;
    const k = new Float32Array(this.phases * taps);
    for (let p = 0; p < this.phases; p++) {
      const frac = p / this.phases;
      let norm = 0;
      for (let j = 0; j < taps; j++) norm += k[p * taps + j] = this.weight(frac + this.half - 1 - j);
      if (norm > 0) for (let j = 0; j < taps; j++) k[p * taps + j]! /= norm;
    }
    return k;
  }

  /** One output sample at input position `pos` (taps from absolute index `first`), for rates with too many phases to tabulate. */
  private direct(pos: number, first: number): number {
    let acc = 0;
    let norm = 0;
    for (let i = first; i < first + 2 * this.half; i++) {
      const h = this.weight(pos - i);
      norm += h;
      if (i >= this.bufStart) acc += (this.buf[i - this.bufStart] ?? 0) * h;
    }
    return norm > 0 ? acc / norm : 0;
  }
}

function toFloat(samples: Int16Array | Float32Array): Float32Array {
  if (samples instanceof Float32Array) return samples;
  const f = new Float32Array(samples.length);
  for (let i = 0; i < samples.length; i++) f[i] = (samples[i] as number) / 32768;
  return f;
}

export interface AudioVisemeStreamOptions {
  /** Sample rate of the pushed audio, Hz (any; converted to 16 kHz). */
  sampleRate: number;
  fps: number;
  smoothing?: Partial<Pick<SmoothingOptions, 'attack' | 'release'>>;
  /** Defaults to the shared session of audio_visemes.onnx. */
  session?: ort.InferenceSession;
}

/**
 * Incremental audio-to-mouth: push() audio chunks as they arrive (Int16 or Float32 in [-1, 1]), get the
 * video frames that became final; end() flushes the rest. Frames come in order, frame k at time k / fps,
 * one per video frame up to the end of the audio. Calls must not overlap (await each one).
 */
export class AudioVisemeStream {
  readonly fps: number;
  readonly sampleRate: number;
  private readonly resampler: Resampler;
  private readonly smoothing: Pick<SmoothingOptions, 'attack' | 'release'>;
  private session: ort.InferenceSession | undefined;
  private channels = 0;
  private pending: Float32Array = new Float32Array(LEFT_PAD); // padded 16 kHz audio not yet turned into features
  private context = new Float32Array(0); // last <= K-1 feature frames, [40, C] row-major
  private contextFrames = 0;
  private inputSamples = 0; // 16 kHz samples received (unpadded)
  private readonly curves: ParamCurves = emptyCurves(0);
  private readonly state = {
    ...(Object.fromEntries(MOUTH_PARAM_KEYS.map((k) => [k, { y: 0 }])) as Record<
      (typeof MOUTH_PARAM_KEYS)[number],
      { y: number }
    >),
    relax: { y: 0 },
  };
  private controlFrames = 0; // control samples produced (sample i at time i / 100)
  private nextVideoFrame = 0;
  private ended = false;

  constructor(options: AudioVisemeStreamOptions) {
    if (!(Number.isFinite(options.fps) && options.fps > 0 && options.fps <= 240))
      throw new RangeError(`fps must be in (0, 240], got ${options.fps}`);
    if (!(Number.isInteger(options.sampleRate) && options.sampleRate >= 4000 && options.sampleRate <= 192000)) {
      throw new RangeError(`sampleRate must be an integer from 4000 to 192000, got ${options.sampleRate}`);
    }
    this.fps = options.fps;
    this.sampleRate = options.sampleRate;
    this.resampler = new Resampler(options.sampleRate);
    this.smoothing = { ...AUDIO_SMOOTHING, ...options.smoothing };
    this.session = options.session;
  }

  /** Feeds audio; resolves to the video frames that are now final. */
  async push(samples: Int16Array | Float32Array): Promise<MouthFrame[]> {
    if (this.ended) throw new Error('AudioVisemeStream: push after end');
    const x = this.resampler.push(toFloat(samples));
    this.inputSamples += x.length;
    this.append(x);
    await this.analyse();
    return this.emit(false);
  }

  /** Flushes: the last frames, up to the end of the pushed audio. */
  async end(): Promise<MouthFrame[]> {
    if (this.ended) return [];
    this.ended = true;
    const tail = this.resampler.push(new Float32Array(0), true);
    this.inputSamples += tail.length;
    this.append(tail);
    this.append(new Float32Array(AHEAD * HOP + WIN)); // right padding: the last frames' lookahead is silence
    await this.analyse();
    return this.emit(true);
  }

  private append(x: Float32Array): void {
    if (x.length === 0) return;
    const merged = new Float32Array(this.pending.length + x.length);
    merged.set(this.pending);
    merged.set(x, this.pending.length);
    this.pending = merged;
  }

  private async analyse(): Promise<void> {
    if (this.pending.length < WIN) return;
    const m = 1 + Math.floor((this.pending.length - WIN) / HOP);
    if (this.contextFrames + m < K) return; // not enough for one output yet
    this.session ??= await audioVisemeSession();
    this.channels ||= featureChannels(this.session);
    const nf = this.channels;
    const audio = this.pending.subarray(0, (m - 1) * HOP + WIN);
    const out = await this.session.run({
      audio: new ort.Tensor('float32', audio, [1, audio.length]),
      context: new ort.Tensor('float32', this.context, [1, nf, this.contextFrames]),
    });
    const probs = out.probs as ort.Tensor;
    const features = out.features as ort.Tensor;
    const t = probs.dims[1] as number;
    this.consume(probs.data as Float32Array, t);
    // Keep the last K-1 feature frames (context ++ new) as the next call's context.
    const all = this.contextFrames + m;
    const keep = Math.min(K - 1, all);
    const next = new Float32Array(nf * keep);
    const feat = features.data as Float32Array;
    for (let b = 0; b < nf; b++) {
      for (let j = 0; j < keep; j++) {
        const src = all - keep + j; // index in context ++ features
        next[b * keep + j] =
          src < this.contextFrames
            ? (this.context[b * this.contextFrames + src] as number)
            : (feat[b * m + (src - this.contextFrames)] as number);
      }
    }
    this.context = next;
    this.contextFrames = keep;
    this.pending = this.pending.slice(m * HOP);
  }

  private consume(p: Float32Array, t: number): void {
    const params = emptyCurves(t);
    const silence = VISEMES.indexOf('sil');
    for (let i = 0; i < t; i++) {
      let best = 0;
      let bestP = -1;
      for (let c = 0; c < VISEMES.length; c++) {
        const pc = p[i * VISEMES.length + c] as number;
        const v = VISEME_PARAMS[VISEMES[c] as Viseme];
        for (const k of MOUTH_PARAM_KEYS) params[k][i] = (params[k][i] as number) + pc * v[k];
        if (pc > bestP) {
          bestP = pc;
          best = c;
        }
      }
      params.viseme[i] = best;
      params.relax[i] = 1 - (p[i * VISEMES.length + silence] as number);
    }
    for (const k of MOUTH_PARAM_KEYS) smoothCausal(params[k], this.smoothing, this.state[k]);
    speakingEnvelope(params.relax, this.state.relax);
    for (let i = 0; i < t; i++) params.closed[i] = params.viseme[i] === 1 || (params.open[i] as number) < 0.02 ? 1 : 0;
    const cat = <T extends Float32Array | Uint8Array>(a: T, b: T): T => {
      const r = new (a.constructor as { new (n: number): T })(a.length + b.length);
      r.set(a);
      r.set(b, a.length);
      return r;
    };
    for (const key of Object.keys(params) as (keyof ParamCurves)[]) {
      (this.curves as unknown as Record<string, Float32Array | Uint8Array>)[key] = cat(this.curves[key], params[key]);
    }
    this.controlFrames += t;
  }

  private emit(final: boolean): MouthFrame[] {
    // Control samples held: the tail of the curve, starting at absolute index base.
    const base = this.controlFrames - this.curves.open.length;
    const duration = this.inputSamples / MODEL_SAMPLE_RATE;
    const totalVideo = Math.ceil(duration * this.fps - 1e-9);
    let last = this.nextVideoFrame - 1;
    // A frame at time t needs control samples floor(t*100) and the one after (or the end of the audio).
    while (true) {
      const k = last + 1;
      const need = Math.floor((k / this.fps) * CONTROL_RATE) + 1;
      if (final ? k >= totalVideo : need >= this.controlFrames) break;
      last = k;
    }
    const count = last - this.nextVideoFrame + 1;
    if (count <= 0) return [];
    const frames = sampleCurves(this.curves, this.fps, count, this.nextVideoFrame, base);
    this.nextVideoFrame += count;
    // Drop control samples no later frame needs.
    const keepFrom = Math.max(0, Math.floor((this.nextVideoFrame / this.fps) * CONTROL_RATE) - base - 1);
    if (keepFrom > 0) {
      for (const key of Object.keys(this.curves) as (keyof ParamCurves)[]) {
        (this.curves as unknown as Record<string, Float32Array | Uint8Array>)[key] = this.curves[key].slice(keepFrom);
      }
    }
    return frames;
  }
}

/** Whole-buffer convenience: the mouth track of a complete recording (same as streaming it in one chunk). */
export async function audioToVisemeTrack(
  samples: Int16Array | Float32Array,
  sampleRate: number,
  fps: number,
  options: Omit<AudioVisemeStreamOptions, 'sampleRate' | 'fps'> = {},
): Promise<{ fps: number; durationSeconds: number; frames: MouthFrame[] }> {
  const stream = new AudioVisemeStream({ ...options, sampleRate, fps });
  const frames = [...(await stream.push(samples)), ...(await stream.end())];
  return { fps, durationSeconds: samples.length / sampleRate, frames };
}
