/**
 * Viseme tracks: per-video-frame mouth parameters, from timed phones (the TTS path) or from a 100 Hz
 * stream of viseme probabilities (the audio path, audio.ts).
 *
 * Both work on a 100 Hz control curve (sample i at time i / 100 s) that is smoothed with an attack/release
 * filter (coarticulation: the jaw opens fast and closes a little slower), then sampled at the video rate.
 * The phone path also knows the future, so it adds an anticipation pass (lips start to shape a sound before
 * it begins) and keeps bilabial closures exact: during p, b and m the lips are fully closed, and a closure
 * shorter than a video frame still closes the frame nearest to its middle.
 */
import type { MouthParams, TimedPhone, Viseme, VisemeSegment } from './visemes.ts';
import { MOUTH_PARAM_KEYS, VISEMES, VISEME_PARAMS, phonesToVisemes, visemeAt } from './visemes.ts';

/** Control rate of the curves, in Hz (one sample per 10 ms, the audio model's hop). */
export const CONTROL_RATE = 100;

export interface MouthFrame extends MouthParams {
  /** Seconds from the start of the audio (frame k of a track is at k / fps). */
  time: number;
  /**
   * How far into speaking the face is, 0..1: rises over an utterance and falls back to exactly 0
   * in silence (SPEAKING_ENVELOPE), so a smiling portrait relaxes while it talks and smiles again after.
   */
  relax: number;
  /** The dominant viseme at this time. */
  viseme: Viseme;
  /** True when the lips must be shut (p, b, m, or silence with the mouth closed). */
  closed: boolean;
}

export interface SmoothingOptions {
  /** Time constant when a parameter rises (mouth opening, lips spreading or rounding), seconds. */
  attack: number;
  /** Time constant when a parameter falls, seconds. */
  release: number;
  /** Time constant of the backward (anticipation) pass of the phone path, seconds; 0 disables it. */
  anticipation: number;
}

const DEFAULT_SMOOTHING: Readonly<SmoothingOptions> = { attack: 0.03, release: 0.045, anticipation: 0.03 };

/** The speaking envelope behind `relax`: up in about a third of a second, back down over about two. */
const SPEAKING_ENVELOPE: Readonly<Pick<SmoothingOptions, 'attack' | 'release'>> = { attack: 0.12, release: 0.6 };
/** Under this the envelope is 0, so a face in silence is exactly the portrait again. */
const ENVELOPE_FLOOR = 0.03;

/** Mouth parameter curves sampled at CONTROL_RATE. */
export interface ParamCurves extends Record<(typeof MOUTH_PARAM_KEYS)[number], Float32Array> {
  /** The speaking envelope (MouthFrame.relax). */
  relax: Float32Array;
  /** Dominant viseme index (into VISEMES) per sample. */
  viseme: Uint8Array;
  /** 1 where the lips must be shut. */
  closed: Uint8Array;
}

function alpha(tau: number): number {
  return tau > 0 ? 1 - Math.exp(-1 / (CONTROL_RATE * tau)) : 1;
}

/** One-pole attack/release filter, in place, forward in time (causal). `state` carries over between chunks. */
export function smoothCausal(
  x: Float32Array,
  opts: Pick<SmoothingOptions, 'attack' | 'release'>,
  state = { y: 0 },
): Float32Array {
  const aUp = alpha(opts.attack);
  const aDown = alpha(opts.release);
  let y = state.y;
  for (let i = 0; i < x.length; i++) {
    const v = x[i] as number;
    y += (v > y ? aUp : aDown) * (v - y);
    x[i] = y;
  }
  state.y = y;
  return x;
}

/** The speaking envelope of a 0..1 speech curve, in place (SPEAKING_ENVELOPE); `state` carries over between chunks. */
export function speakingEnvelope(speech: Float32Array, state = { y: 0 }): Float32Array {
  smoothCausal(speech, SPEAKING_ENVELOPE, state);
  for (let i = 0; i < speech.length; i++) if ((speech[i] as number) < ENVELOPE_FLOOR) speech[i] = 0;
  return speech;
}

/** Empty curves of n control samples. */
export function emptyCurves(n: number): ParamCurves {
  const curves = {
    viseme: new Uint8Array(n),
    closed: new Uint8Array(n),
    relax: new Float32Array(n),
  } as Partial<ParamCurves>;
  for (const k of MOUTH_PARAM_KEYS) curves[k] = new Float32Array(n);
  return curves as ParamCurves;
}

function smoothTwoPass(x: Float32Array, opts: SmoothingOptions): Float32Array {
  const fwd = smoothCausal(Float32Array.from(x), opts, { y: x[0] ?? 0 });
  if (!(opts.anticipation > 0)) return fwd;
  const a = alpha(opts.anticipation);
  let z = x[x.length - 1] ?? 0;
  for (let i = x.length - 1; i >= 0; i--) {
    z += a * ((x[i] as number) - z);
    x[i] = 0.5 * ((fwd[i] as number) + z);
  }
  return x;
}

/** Target (unsmoothed) and smoothed curves of the phone path, from timed visemes. */
export function segmentCurves(
  segments: readonly VisemeSegment[],
  durationSeconds: number,
  smoothing: SmoothingOptions = DEFAULT_SMOOTHING,
): ParamCurves {
  const n = Math.max(1, Math.ceil(durationSeconds * CONTROL_RATE) + 1);
  const curves = emptyCurves(n);
  for (let i = 0; i < n; i++) {
    const v = visemeAt(segments, i / CONTROL_RATE);
    const p = VISEME_PARAMS[v];
    for (const k of MOUTH_PARAM_KEYS) curves[k][i] = p[k];
    curves.viseme[i] = VISEMES.indexOf(v);
    curves.relax[i] = v === 'sil' ? 0 : 1;
  }
  for (const k of MOUTH_PARAM_KEYS) smoothTwoPass(curves[k], smoothing);
  speakingEnvelope(curves.relax);
  // Bilabial closures are exact: lips shut over the whole p/b/m segment.
  for (const s of segments) {
    if (s.viseme !== 'PP') continue;
    for (let i = Math.ceil(s.start * CONTROL_RATE); i < Math.min(n, s.end * CONTROL_RATE); i++) {
      curves.open[i] = 0;
      curves.closed[i] = 1;
    }
  }
  for (let i = 0; i < n; i++) if ((curves.open[i] as number) < 0.02) curves.closed[i] = 1;
  return curves;
}

/**
 * Samples control-rate curves at video frame times k / fps, k = firstFrame .. firstFrame + frames - 1.
 * `base` is the control-sample index of the curves' first element (a stream keeps only a recent tail).
 */
export function sampleCurves(curves: ParamCurves, fps: number, frames: number, firstFrame = 0, base = 0): MouthFrame[] {
  const out: MouthFrame[] = [];
  const n = curves.open.length;
  for (let k = firstFrame; k < firstFrame + frames; k++) {
    const time = k / fps;
    const x = Math.min(Math.max(time * CONTROL_RATE - base, 0), n - 1);
    const i0 = Math.floor(x);
    const i1 = Math.min(i0 + 1, n - 1);
    const f = x - i0;
    const lerp = (c: Float32Array) => (c[i0] as number) * (1 - f) + (c[i1] as number) * f;
    const nearest = f < 0.5 ? i0 : i1;
    out.push({
      time,
      open: lerp(curves.open),
      wide: lerp(curves.wide),
      round: lerp(curves.round),
      press: lerp(curves.press),
      tuck: lerp(curves.tuck),
      relax: lerp(curves.relax),
      viseme: VISEMES[curves.viseme[nearest] as number] as Viseme,
      closed: curves.closed[nearest] === 1,
    });
  }
  return out;
}

export interface VisemeTrack {
  fps: number;
  durationSeconds: number;
  /** Frame k is at time k / fps; there are ceil(duration * fps) frames. */
  frames: MouthFrame[];
}

function checkFps(fps: number): void {
  if (!(Number.isFinite(fps) && fps > 0 && fps <= 240)) throw new RangeError(`fps must be in (0, 240], got ${fps}`);
}

/**
 * The phone path: per-video-frame mouth parameters from TTS phone timings (e.g. synthesize().phones).
 * `durationSeconds` defaults to the end of the last phone.
 */
export function visemeTrack(
  phones: readonly TimedPhone[],
  fps: number,
  options: { durationSeconds?: number; smoothing?: Partial<SmoothingOptions> } = {},
): VisemeTrack {
  checkFps(fps);
  const segments = phonesToVisemes(phones);
  const durationSeconds = options.durationSeconds ?? phones[phones.length - 1]?.end ?? 0;
  const curves = segmentCurves(segments, durationSeconds, { ...DEFAULT_SMOOTHING, ...options.smoothing });
  const frames = sampleCurves(curves, fps, Math.ceil(durationSeconds * fps - 1e-9));
  // A closure shorter than a frame still shuts the frame nearest to its middle.
  for (const s of segments) {
    if (s.viseme !== 'PP') continue;
    const f = frames[Math.round(((s.start + s.end) / 2) * fps)];
    if (f) Object.assign(f, { open: 0, press: Math.max(f.press, 0.6), closed: true, viseme: 'PP' as Viseme });
  }
  return { fps, durationSeconds, frames };
}
