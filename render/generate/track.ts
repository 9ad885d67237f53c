/**
 * Motion tracks: per-frame MotionParams over time. The idle layer (breathing, head drift,
 * gaze drift, blinks) is built from terms that complete whole cycles over the track and
 * have zero value and zero velocity at its ends, so
 *   - an idle loop is seamless by construction (frame N would equal frame 0), and
 *   - every track starts at the neutral pose (all parameters 0 = the framed portrait),
 *     which is idle frame 0, so idle and clips can be switched at their boundaries.
 * Frame i is at t = i / fps; a track of N frames spans [0, N / fps), and its end (t = N/fps,
 * the frame after the last) is neutral again.
 */
import type { MotionParams } from './motion.ts';
import { NEUTRAL_PARAMS, PARAM_NAMES } from './motion.ts';

/** Deterministic PRNG (mulberry32) from a number or a string. */
export function prng(seed: number | string): () => number {
  let h = 0x9e3779b9;
  const s = String(seed);
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x85ebca6b) ^ (h >>> 13);
  let a = h >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function smoothstep(t: number): number {
  if (t <= 0) return 0;
  if (t >= 1) return 1;
  return t * t * (3 - 2 * t);
}

/** Blink closure around a peak at dt = 0 (seconds): fast close (0.1 s), slower open (0.2 s). */
export const BLINK_CLOSE_S = 0.1;
export const BLINK_OPEN_S = 0.2;
export function blinkShape(dt: number): number {
  if (dt <= -BLINK_CLOSE_S || dt >= BLINK_OPEN_S) return 0;
  if (dt <= 0) return smoothstep((dt + BLINK_CLOSE_S) / BLINK_CLOSE_S);
  return 1 - smoothstep(dt / BLINK_OPEN_S);
}

export interface BlinkOptions {
  /** Treat the track as a loop: intervals across the wrap count too. */
  loop: boolean;
  /** Keep blinks this far (seconds) from both ends. Default 0.25. */
  margin?: number;
  /** Mean interval scale (1 = about 3.5 s between blinks). */
  rate?: number;
}

/**
 * Blink peak times (seconds, each on a frame) for a track of `duration` seconds: intervals of
 * 2 to 6 s (across the wrap too, for a loop), none within `margin` of either end, so no
 * blink straddles the loop point.
 */
export function scheduleBlinks(duration: number, fps: number, rand: () => number, options: BlinkOptions): number[] {
  const margin = options.margin ?? 0.25;
  const usable = duration - 2 * margin - BLINK_CLOSE_S - BLINK_OPEN_S;
  if (usable <= 0) return [];
  const mean = 3.5 / (options.rate ?? 1);
  let n = Math.round(duration / mean);
  n = Math.max(n, Math.ceil(duration / 6), 1);
  n = Math.min(n, Math.max(1, Math.floor(duration / 2)));
  const spacing = duration / n;
  // Jitter small enough to keep every interval (and the wrap) within 2..6 s.
  const jitter = Math.max(0, Math.min(0.25 * spacing, (spacing - 2) / 2));
  const peaks: number[] = [];
  for (let k = 0; k < n; k++) {
    // Centred in equal slots: the wrap interval (last to first, for a loop) is a slot too.
    let t = (k + 0.5) * spacing + (rand() * 2 - 1) * jitter;
    const lo = margin + BLINK_CLOSE_S;
    const hi = duration - margin - BLINK_OPEN_S;
    t = Math.min(hi, Math.max(lo, t));
    peaks.push(Math.round(t * fps) / fps);
  }
  peaks.sort((a, b) => a - b);
  return peaks;
}

/**
 * Drift with zero value and zero slope at 0 and T, in whole cycles over T:
 *   sum a_k (1 - cos(w_k t)) / 2  +  sum b_k sin(w_k t) (1 - cos(w_1 t)) / 2,   w_k = 2 pi k / T.
 * The cosine terms alone are symmetric about T/2 (the second half would replay the first
 * backwards); the sine-times-bump terms break that symmetry.
 */
function driftTerm(coefs: readonly number[], t: number, T: number): number {
  const n = coefs.length >> 1;
  const bump = (1 - Math.cos((2 * Math.PI * t) / T)) / 2;
  let v = 0;
  for (let k = 0; k < n; k++) {
    const w = (2 * Math.PI * (k + 1) * t) / T;
    v += (coefs[k]! * (1 - Math.cos(w))) / 2 + coefs[n + k]! * Math.sin(w) * bump;
  }
  return v;
}

export interface IdleStyle {
  /** Multiplies head drift amplitudes (1 = calm default). */
  energy: number;
  /** Multiplies the blink rate. */
  blinkRate: number;
  /** A soft smile that swells and settles over the track (0 = none). */
  smile: number;
  /** Occasional glances (gaze drift amplitude, 0..1). */
  gaze: number;
  /** Breathing depth (0..1.5). */
  breath: number;
}

export const DEFAULT_IDLE_STYLE: Readonly<IdleStyle> = Object.freeze({
  energy: 1,
  blinkRate: 1,
  smile: 0,
  gaze: 1,
  breath: 1,
});

/** Idle drift bounds at energy 1 (degrees / face widths); typical excursions are a third of these. */
const IDLE_AMP = { yaw: 3, pitch: 2, roll: 1.5, tx: 0.008, ty: 0.005, gaze: 0.3 } as const;

export interface IdleLayer {
  params: MotionParams[];
  blinkPeaks: number[];
}

/**
 * The idle layer over `frames` frames: whole-cycle breathing (about 4 s a breath), head and
 * gaze drift as sums of 1-3 whole cycles with seeded weights, and scheduled blinks.
 */
export function idleLayer(
  frames: number,
  fps: number,
  seed: number | string,
  style: IdleStyle = DEFAULT_IDLE_STYLE,
  blinks: { loop: boolean } = { loop: true },
): IdleLayer {
  const rand = prng(seed);
  const T = frames / fps;
  /** n cosine and n sine-bump weights, normalised so the drift stays within +-1. */
  const coefs = (n: number): number[] => {
    const c = Array.from({ length: 2 * n }, () => rand() * 2 - 1);
    const norm = Math.max(
      1e-6,
      c.reduce((s, x) => s + Math.abs(x), 0),
    );
    return c.map((x) => x / norm);
  };
  const cycles = Math.max(1, Math.min(3, Math.floor(T / 2)));
  const drift = {
    yaw: coefs(cycles),
    pitch: coefs(cycles),
    roll: coefs(cycles),
    tx: coefs(cycles),
    ty: coefs(cycles),
    gx: coefs(Math.min(3, cycles + 1)),
    gy: coefs(Math.min(3, cycles + 1)),
  };
  const breaths = Math.max(1, Math.round(T / 4));
  const blinkPeaks = scheduleBlinks(T, fps, rand, { loop: blinks.loop, rate: style.blinkRate });
  const e = style.energy;
  const params: MotionParams[] = [];
  for (let i = 0; i < frames; i++) {
    const t = i / fps;
    let blink = 0;
    for (const p of blinkPeaks) blink = Math.max(blink, blinkShape(t - p));
    params.push({
      ...NEUTRAL_PARAMS,
      yaw: IDLE_AMP.yaw * e * driftTerm(drift.yaw, t, T),
      pitch: IDLE_AMP.pitch * e * driftTerm(drift.pitch, t, T),
      roll: IDLE_AMP.roll * e * driftTerm(drift.roll, t, T),
      tx: IDLE_AMP.tx * e * driftTerm(drift.tx, t, T),
      ty: IDLE_AMP.ty * e * driftTerm(drift.ty, t, T),
      breath: (style.breath * (1 - Math.cos((2 * Math.PI * breaths * t) / T))) / 2,
      blinkLeft: blink,
      blinkRight: blink,
      smile: (style.smile * (1 - Math.cos((2 * Math.PI * t) / T))) / 2,
      squint: (0.3 * style.smile * (1 - Math.cos((2 * Math.PI * t) / T))) / 2,
      gazeX: IDLE_AMP.gaze * style.gaze * driftTerm(drift.gx, t, T),
      gazeY: 0.5 * IDLE_AMP.gaze * style.gaze * driftTerm(drift.gy, t, T),
    });
  }
  return { params, blinkPeaks };
}

/** Element-wise sum of parameter tracks of equal length (blinks combine by max). */
export function addTracks(a: MotionParams[], b: MotionParams[]): MotionParams[] {
  return a.map((p, i) => {
    const q = b[i]!;
    const out = { ...p };
    for (const k of PARAM_NAMES) {
      if (k === 'blinkLeft' || k === 'blinkRight')
        out[k] = Math.max(p[k], q[k]) + Math.min(0, p[k]) + Math.min(0, q[k]);
      else out[k] = p[k] + q[k];
    }
    return out;
  });
}
