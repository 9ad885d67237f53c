/**
 * generateIdleLoop and generateClip: plan the motion (cheap, synchronous after framing) and
 * hand back a GeneratedMotion whose frames are rendered on demand, one at a time, so a
 * caller streams them to the MP4 writer and the frame cache without holding them all.
 */
import type { FaceRig } from '../rig/types.ts';
import { GenerateError } from './errors.ts';
import type { FramedPortrait, FramingOptions } from './framing.ts';
import { framePortrait } from './framing.ts';
import type { MotionFrame, MotionParams } from './motion.ts';
import { MotionModel, clampParams } from './motion.ts';
import type { MotionPlan } from './prompt.ts';
import { idleStyleFromPrompt, normalizePrompt, planFromPrompt, planTrack } from './prompt.ts';
import { addTracks, idleLayer } from './track.ts';

export const DEFAULT_FPS = 25;
const DEFAULT_IDLE_SECONDS = 8;
const DEFAULT_CLIP_SECONDS = 5;
const CLIP_SECONDS_MIN = 4;
const CLIP_SECONDS_MAX = 8;

/** A framed portrait with its motion model, reusable for the loop and every clip of an avatar. */
export interface PreparedPortrait {
  framed: FramedPortrait;
  model: MotionModel;
}

export type PortraitInput = Buffer | string | PreparedPortrait;

export async function preparePortrait(
  portrait: Buffer | string,
  framing: FramingOptions = {},
): Promise<PreparedPortrait> {
  const framed = await framePortrait(portrait, framing);
  return { framed, model: new MotionModel(framed) };
}

async function prepared(portrait: PortraitInput, framing?: FramingOptions): Promise<PreparedPortrait> {
  if (typeof portrait === 'object' && !Buffer.isBuffer(portrait) && 'model' in portrait) return portrait;
  return preparePortrait(portrait, framing);
}

export interface GeneratedMotion {
  kind: 'idle' | 'clip';
  /** True for the idle loop: frame N-1 is followed by frame 0. */
  loop: boolean;
  fps: number;
  width: number;
  height: number;
  frameCount: number;
  seed: number | string;
  motionPrompt: string | null;
  /** Per-frame parameters (already clamped). params[0] is neutral. */
  params: MotionParams[];
  /** Blink peaks in seconds (each on a frame). */
  blinkPeaks: number[];
  plan: MotionPlan | null;
  /** Prompt words that mapped to no motion. */
  unrecognized: string[];
  prepared: PreparedPortrait;
  /** The framed portrait's rig (the neutral frame's). */
  rig: FaceRig;
  /** Render frame i (into `out` when given). */
  renderFrame(i: number, out?: Uint8Array): MotionFrame;
  /** Moved landmarks of frame i, without rendering. */
  landmarks(i: number): MotionFrame['landmarks'];
  /** Every frame in order; reuses one pixel buffer unless `copy`. */
  frames(options?: { copy?: boolean }): Generator<MotionFrame & { index: number }>;
}

function checkFps(fps: unknown): number {
  const v = fps ?? DEFAULT_FPS;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 5 || v > 60) {
    throw new GenerateError('invalid_options', `fps must be an integer from 5 to 60, got ${String(fps)}`, { fps });
  }
  return v;
}

function checkSeed(seed: unknown): number | string {
  if (seed === undefined) return 1;
  if ((typeof seed === 'number' && Number.isFinite(seed)) || typeof seed === 'string') return seed;
  throw new GenerateError('invalid_options', 'seed must be a finite number or a string');
}

function motion(
  kind: 'idle' | 'clip',
  p: PreparedPortrait,
  fps: number,
  seed: number | string,
  prompt: string | null,
  params: MotionParams[],
  blinkPeaks: number[],
  plan: MotionPlan | null,
): GeneratedMotion {
  const clamped = params.map(clampParams);
  const { model } = p;
  const renderFrame = (i: number, out?: Uint8Array): MotionFrame => {
    if (!Number.isInteger(i) || i < 0 || i >= clamped.length)
      throw new RangeError(`frame ${i} out of 0..${clamped.length - 1}`);
    return model.render(clamped[i]!, out);
  };
  return {
    kind,
    loop: kind === 'idle',
    fps,
    width: model.width,
    height: model.height,
    frameCount: clamped.length,
    seed,
    motionPrompt: prompt,
    params: clamped,
    blinkPeaks,
    plan,
    unrecognized: plan?.unrecognized ?? [],
    prepared: p,
    rig: model.rig,
    renderFrame,
    landmarks: (i) => model.landmarks(clamped[i]!),
    *frames(options = {}) {
      const buf = new Uint8Array(model.width * model.height * 4);
      for (let i = 0; i < clamped.length; i++) {
        const f = renderFrame(i, options.copy ? undefined : buf);
        yield { ...f, index: i };
      }
    },
  };
}

export interface IdleLoopOptions {
  /** Loop length in seconds, default 8 (2 to 30). Whole frames: round(seconds * fps). */
  seconds?: number;
  fps?: number;
  seed?: number | string;
  /** The avatar's motionPrompt: sets the loop's style (calm/lively, smiling, glances). */
  motionPrompt?: string;
  framing?: FramingOptions;
}

/**
 * A seamless idle loop: breathing, tiny head and gaze drift, blinks at 2-6 s intervals that
 * never straddle the loop point. Frame 0 is the neutral framed portrait. Deterministic given
 * the seed.
 */
export async function generateIdleLoop(
  portrait: PortraitInput,
  options: IdleLoopOptions = {},
): Promise<GeneratedMotion> {
  const fps = checkFps(options.fps);
  const seconds = options.seconds ?? DEFAULT_IDLE_SECONDS;
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 2 || seconds > 30) {
    throw new GenerateError('invalid_duration', `The idle loop must last 2 to 30 seconds, got ${String(seconds)}.`, {
      seconds,
    });
  }
  const seed = checkSeed(options.seed);
  const prompt = options.motionPrompt === undefined ? undefined : normalizePrompt(options.motionPrompt);
  const { style, plan } = idleStyleFromPrompt(prompt);
  const p = await prepared(portrait, options.framing);
  const frames = Math.round(seconds * fps);
  const idle = idleLayer(frames, fps, `${seed}:idle`, style, { loop: true });
  return motion('idle', p, fps, seed, prompt ?? null, idle.params, idle.blinkPeaks, plan);
}

export interface ClipOptions {
  motionPrompt: string;
  /** Integer 4 to 8, default 5 (the API's generated clip duration). */
  durationSeconds?: number;
  fps?: number;
  seed?: number | string;
  framing?: FramingOptions;
}

export function checkClipDuration(d: unknown): number {
  if (d === undefined) return DEFAULT_CLIP_SECONDS;
  if (typeof d !== 'number' || !Number.isInteger(d) || d < CLIP_SECONDS_MIN || d > CLIP_SECONDS_MAX) {
    throw new GenerateError(
      'invalid_duration',
      `durationSeconds must be a whole number of seconds from ${CLIP_SECONDS_MIN} to ${CLIP_SECONDS_MAX}, got ${String(d)}.`,
      { durationSeconds: d, min: CLIP_SECONDS_MIN, max: CLIP_SECONDS_MAX },
    );
  }
  return d;
}

/**
 * A motion clip art-directed by `motionPrompt` (see PROMPTS.md), over a gentle idle layer
 * (breathing, drift, blinks). It starts at the neutral pose (idle frame 0) and eases back to
 * it, so it can be cut in and out at the idle loop's boundary.
 */
export async function generateClip(portrait: PortraitInput, options: ClipOptions): Promise<GeneratedMotion> {
  if (!options || typeof options !== 'object')
    throw new GenerateError('invalid_options', 'generateClip needs options with a motionPrompt.');
  const prompt = normalizePrompt(options.motionPrompt);
  const duration = checkClipDuration(options.durationSeconds);
  const fps = checkFps(options.fps);
  const seed = checkSeed(options.seed);
  const plan = planFromPrompt(prompt, duration, seed);
  const p = await prepared(portrait, options.framing);
  const frames = duration * fps;
  // A quieter idle layer under the gestures; blinks keep clear of the ends.
  const idle = idleLayer(
    frames,
    fps,
    `${seed}:clip`,
    { energy: 0.5, blinkRate: 1, smile: 0, gaze: 0.5, breath: 1 },
    { loop: false },
  );
  const gestures = planTrack(plan, frames, fps);
  // No idle blink while a planned blink or wink plays.
  const ownBlinks = plan.segments.some((s) => s.actions.some((a) => a.kind === 'blink' || a.kind === 'wink'));
  const base = ownBlinks ? idle.params.map((q) => ({ ...q, blinkLeft: 0, blinkRight: 0 })) : idle.params;
  const params = addTracks(base, gestures);
  return motion('clip', p, fps, seed, prompt, params, ownBlinks ? [] : idle.blinkPeaks, plan);
}
