/**
 * Motion prompt -> motion plan -> per-frame parameters. The mapping is rule-based and
 * documented in PROMPTS.md (keep the two in step). An LLM may refine the draft plan through
 * the `refine` hook of generateClip; nothing here calls a network.
 */
import { GenerateError } from './errors.ts';
import type { MotionParams } from './motion.ts';
import { NEUTRAL_PARAMS } from './motion.ts';
import type { IdleStyle } from './track.ts';
import { DEFAULT_IDLE_STYLE, blinkShape, prng, smoothstep } from './track.ts';

export const MOTION_PROMPT_MAX = 1200;

type ActionKind =
  | 'nod'
  | 'shake'
  | 'tilt'
  | 'look'
  | 'smile'
  | 'laugh'
  | 'brows'
  | 'surprise'
  | 'frown'
  | 'think'
  | 'listen'
  | 'agree'
  | 'disagree'
  | 'greet'
  | 'blink'
  | 'wink'
  | 'idle';
type Direction = 'left' | 'right' | 'up' | 'down';

interface PlannedAction {
  kind: ActionKind;
  /** Amplitude multiplier, 0.2..2 (1 = default). */
  intensity: number;
  /** Speed multiplier, 0.3..3 (1 = default). */
  tempo: number;
  /** The subject's own left/right (left: towards the image's right), or up/down. */
  direction?: Direction;
  /** Repetitions for nods, shakes and blinks. */
  repeats?: number;
}

interface PlanSegment {
  /** Seconds from the start of the clip. */
  start: number;
  end: number;
  /** The prompt text this segment came from. */
  text: string;
  /** Played together over the segment. */
  actions: PlannedAction[];
}

export interface MotionPlan {
  durationSeconds: number;
  segments: PlanSegment[];
  /** Words and phrases that mapped to motion. */
  recognized: string[];
  /** Words that mapped to nothing (the API layer may reject a prompt on these). */
  unrecognized: string[];
  source: 'rules';
}

interface Rule {
  kind: ActionKind;
  re: RegExp;
  /** Natural duration in seconds at tempo 1. */
  seconds: number;
}

// Order matters: compound gestures first; a clause may match several rules (played together).
const RULES: Rule[] = [
  { kind: 'greet', re: /\b(greet\w*|hello|hi|hey|welcom\w*|wav(e|es|ing))\b/g, seconds: 1.8 },
  { kind: 'disagree', re: /\b(disagree\w*|no|nope|deny|denies|denying|refus\w*|reject\w*)\b/g, seconds: 1.8 },
  { kind: 'agree', re: /\b(agree\w*|yes|yeah|affirm\w*|approv\w*|acknowledg\w*|understand\w*)\b/g, seconds: 1.6 },
  { kind: 'nod', re: /\bnod\w*\b/g, seconds: 1.6 },
  { kind: 'shake', re: /\b(shak\w*|shook)\b/g, seconds: 1.6 },
  { kind: 'tilt', re: /\b(tilt\w*|cock\w*|lean\w*)\b/g, seconds: 1.8 },
  { kind: 'look', re: /\b(look\w*|glanc\w*|gaz\w*|turn\w*|peek\w*)\b/g, seconds: 1.8 },
  { kind: 'laugh', re: /\b(laugh\w*|chuckl\w*|giggl\w*)\b/g, seconds: 2 },
  {
    kind: 'smile',
    re: /\b(smil\w*|grin\w*|happy|cheerful\w*|joyful\w*|warm\w*|friendly|pleased|delighted)\b/g,
    seconds: 2,
  },
  { kind: 'surprise', re: /\b(surpris\w*|amaz\w*|astonish\w*|shock\w*|wow|impressed|startled)\b/g, seconds: 1.6 },
  { kind: 'brows', re: /\b(eye)?brows?\b/g, seconds: 1.4 },
  {
    kind: 'frown',
    re: /\b(frown\w*|scowl\w*|serious\w*|stern\w*|concern\w*|worr\w*|sad\w*|confus\w*|puzzl\w*|skeptic\w*|doubt\w*)\b/g,
    seconds: 1.8,
  },
  {
    kind: 'think',
    re: /\b(think\w*|ponder\w*|thought\w*|consider\w*|wonder\w*|hmm+|contemplat\w*|reflect\w*|recall\w*|rememb\w*)\b/g,
    seconds: 2.4,
  },
  {
    kind: 'listen',
    re: /\b(listen\w*|attentiv\w*|attention|interest\w*|engag\w*|focus\w*|curious\w*)\b/g,
    seconds: 2.4,
  },
  { kind: 'wink', re: /\bwink\w*\b/g, seconds: 0.8 },
  { kind: 'blink', re: /\bblink\w*\b/g, seconds: 0.8 },
  {
    kind: 'idle',
    re: /\b(calm\w*|relax\w*|idle|neutral\w*|still|natural\w*|breath\w*|rest\w*|wait\w*|patient\w*|quiet\w*|composed|steady)\b/g,
    seconds: 2,
  },
];

const LOW =
  /\b(slight(ly)?|a (little|bit)|a tiny bit|gentl[ey]|subtl[ey]|soft(ly)?|barely|small|little|mild(ly)?|light(ly)?|hint of)\b/g;
const HIGH =
  /\b(a lot|strong(ly)?|vigorous(ly)?|big|broad(ly)?|wide(ly)?|very|really|deep(ly)?|firm(ly)?|energetic(ally)?|enthusiastic(ally)?|emphatic(ally)?|dramatic(ally)?|exaggerated|hearty|heartily|intense(ly)?)\b/g;
const SLOW = /\b(slow(ly)?|leisurely|lazily|calmly|unhurried)\b/g;
const FAST = /\b(quick(ly)?|fast|rapid(ly)?|brisk(ly)?|swift(ly)?)\b/g;
const COUNT: [RegExp, number][] = [
  [/\bonce\b/g, 1],
  [/\b(twice|two times)\b/g, 2],
  [/\b(thrice|three times)\b/g, 3],
  [/\b(a few times|several times|repeatedly)\b/g, 3],
];
const DIRECTIONS: [RegExp, Direction][] = [
  [/\b(left|leftward)s?\b/g, 'left'],
  [/\b(right|rightward)s?\b/g, 'right'],
  [/\b(up|upward|upwards|skyward|ceiling)\b/g, 'up'],
  [/\b(down|downward|downwards|floor|ground)\b/g, 'down'],
];
/** Words that carry no motion of their own and are not reported as unrecognised. */
const STOPWORDS = new Set(
  (
    'a an the and or then while with as at to of in on into for from by is are be being it its this that these those ' +
    'he she they his her their them him head heads face eyes eye mouth camera viewer user person avatar side sideways ' +
    'aside away around back again also briefly moment moments bit time times gesture gestures expression expressions ' +
    'motion movement move moves moving make makes making do does doing some one two three small slightly very ' +
    'after before next finally first end start toward towards over just like little more less gives give showing show shows ' +
    'both each same own slight lot tiny hint'
  ).split(' '),
);
const SPLIT = /[,;.!?]+|\b(?:then|after that|afterwards|followed by|next|finally|before)\b/;

function count(re: RegExp, text: string): string[] {
  return [...text.matchAll(re)].map((m) => m[0]);
}

/** Validate a motion prompt as the API documents it: trimmed, nonempty, at most 1,200 characters. */
export function normalizePrompt(prompt: unknown): string {
  if (typeof prompt !== 'string') throw new GenerateError('invalid_prompt', 'The motion prompt must be a string.');
  const text = prompt.trim();
  if (text.length === 0)
    throw new GenerateError(
      'invalid_prompt',
      'The motion prompt is empty; describe the motion, e.g. "nod slowly, then smile".',
    );
  if (text.length > MOTION_PROMPT_MAX) {
    throw new GenerateError(
      'invalid_prompt',
      `The motion prompt is ${text.length} characters long; at most ${MOTION_PROMPT_MAX} are allowed.`,
      {
        length: text.length,
        max: MOTION_PROMPT_MAX,
      },
    );
  }
  return text;
}

/** Lead-in and lead-out (seconds) kept at the idle pose so clips start and end neutral. */
const EDGE_S = 0.3;

/** Rule-based draft plan for a clip of `durationSeconds` (validated by the caller). */
export function planFromPrompt(prompt: string, durationSeconds: number, seed: number | string = 0): MotionPlan {
  const text = normalizePrompt(prompt);
  const rand = prng(`${seed}:plan`);
  const recognized: string[] = [];
  const unrecognized: string[] = [];
  const clauses = text
    .toLowerCase()
    .split(SPLIT)
    .map((c) => (c ?? '').trim())
    .filter((c) => c.length > 0);
  const drafts: { text: string; actions: PlannedAction[]; seconds: number }[] = [];
  for (const clause of clauses) {
    let rest = ` ${clause.replace(/[^a-z' -]/g, ' ')} `;
    const take = (re: RegExp): string[] => {
      const found = count(re, rest);
      if (found.length) rest = rest.replace(re, ' ');
      return found;
    };
    const low = take(LOW);
    const high = take(HIGH);
    const slow = take(SLOW);
    const fast = take(FAST);
    let repeats: number | undefined;
    for (const [re, n] of COUNT) if (take(re).length) repeats = n;
    let direction: Direction | undefined;
    for (const [re, d] of DIRECTIONS) if (take(re).length && !direction) direction = d;
    const intensity = high.length ? 1.5 : low.length ? 0.55 : 1;
    const tempo = fast.length ? 1.6 : slow.length ? 0.6 : 1;
    recognized.push(...low, ...high, ...slow, ...fast);
    if (direction) recognized.push(direction);
    const actions: PlannedAction[] = [];
    let seconds = 0;
    // "raise eyebrows" style verbs are part of the brows rule.
    // "look" is only a gesture with somewhere to look; "looks surprised" is a linking verb.
    const lookSomewhere = direction !== undefined || /\b(around|away|aside|sideways)\b/.test(rest);
    for (const rule of RULES) {
      if (rule.kind === 'look' && !lookSomewhere) {
        recognized.push(...take(rule.re).map((h) => h.trim()));
        continue;
      }
      const hits = take(rule.re);
      if (!hits.length) continue;
      if (actions.some((a) => a.kind === rule.kind)) continue;
      recognized.push(...hits.map((h) => h.trim()));
      const a: PlannedAction = { kind: rule.kind, intensity, tempo };
      if (direction && (rule.kind === 'look' || rule.kind === 'tilt' || rule.kind === 'think' || rule.kind === 'wink'))
        a.direction = direction;
      if (
        repeats &&
        (rule.kind === 'nod' ||
          rule.kind === 'shake' ||
          rule.kind === 'blink' ||
          rule.kind === 'agree' ||
          rule.kind === 'disagree')
      )
        a.repeats = repeats;
      actions.push(a);
      seconds = Math.max(seconds, (rule.seconds * (repeats ? Math.max(1, repeats / 2) : 1)) / tempo);
    }
    // Verbs that only make sense with a rule above ("raise", "lift") are fine when one matched.
    if (actions.some((a) => a.kind === 'brows' || a.kind === 'surprise')) take(/\b(rais\w*|lift\w*)\b/g);
    if (actions.some((a) => a.kind === 'shake' || a.kind === 'disagree')) take(/\bno\b/g);
    for (const w of rest.split(/\s+/)) {
      const word = w.replace(/^'+|'+$/g, '');
      if (word && !STOPWORDS.has(word)) unrecognized.push(word);
    }
    if (actions.length) drafts.push({ text: clause, actions, seconds });
  }
  if (drafts.length === 0) drafts.push({ text, actions: [{ kind: 'idle', intensity: 1, tempo: 1 }], seconds: 2 });

  // Share the clip between the segments in proportion to their natural lengths.
  const span = Math.max(0.5, durationSeconds - 2 * EDGE_S);
  const total = drafts.reduce((s, d) => s + d.seconds, 0);
  let at = EDGE_S;
  const segments: PlanSegment[] = drafts.map((d) => {
    const len = (span * d.seconds) / total;
    const seg: PlanSegment = { start: round3(at), end: round3(at + len), text: d.text, actions: d.actions };
    at += len;
    return seg;
  });
  // Directionless looks, tilts and thinks get a seeded side so takes differ but repeat exactly.
  for (const seg of segments) {
    for (const a of seg.actions) {
      if ((a.kind === 'tilt' || a.kind === 'think') && !a.direction) a.direction = rand() < 0.5 ? 'left' : 'right';
      if (a.kind === 'look' && !a.direction) a.direction = rand() < 0.5 ? 'left' : 'right';
    }
  }
  return {
    durationSeconds,
    segments,
    recognized: unique(recognized),
    unrecognized: unique(unrecognized),
    source: 'rules',
  };
}

/** Idle style from an avatar's loop prompt (energy, smile, blink rate); unknown words are ignored. */
export function idleStyleFromPrompt(prompt: string | undefined): { style: IdleStyle; plan: MotionPlan | null } {
  if (prompt === undefined) return { style: { ...DEFAULT_IDLE_STYLE }, plan: null };
  const plan = planFromPrompt(prompt, 8);
  const style: IdleStyle = { ...DEFAULT_IDLE_STYLE };
  const text = prompt.toLowerCase();
  for (const seg of plan.segments) {
    for (const a of seg.actions) {
      if (a.kind === 'smile' || a.kind === 'greet' || a.kind === 'laugh')
        style.smile = Math.max(style.smile, 0.35 * a.intensity);
      if (a.kind === 'listen' || a.kind === 'think') style.gaze = 1.5;
      if (a.kind === 'idle') style.energy = Math.min(style.energy, 0.7);
    }
  }
  if (/\b(energetic|lively|animated|excited|expressive|dynamic)\b/.test(text)) style.energy = 1.6;
  if (/\b(calm|still|relaxed|serene|composed|stoic)\b/.test(text)) style.energy = 0.6;
  if (/\b(nervous|anxious|fidget\w*)\b/.test(text)) {
    style.energy = 1.4;
    style.blinkRate = 1.5;
  }
  return { style, plan };
}

/** Ease in and out over `ramp` seconds inside [0, len]. */
function envelope(tau: number, len: number, ramp: number): number {
  const r = Math.min(ramp, len / 2);
  if (tau <= 0 || tau >= len) return 0;
  return smoothstep(tau / r) * smoothstep((len - tau) / r);
}

/** Whole cycles that fit `len` seconds at `hz`, at least 1 (or `repeats`). */
function cyclesIn(len: number, hz: number, repeats: number | undefined): number {
  return repeats ?? Math.max(1, Math.round(len * hz));
}

/**
 * The plan's gestures as per-frame parameter offsets (added to the idle layer). Every
 * contribution is zero at its segment's ends, and segments stay inside the clip.
 */
export function planTrack(plan: MotionPlan, frames: number, fps: number): MotionParams[] {
  const out: MotionParams[] = Array.from({ length: frames }, () => ({ ...NEUTRAL_PARAMS }));
  for (const seg of plan.segments) {
    const len = seg.end - seg.start;
    for (const a of seg.actions) {
      const I = a.intensity;
      const tempo = a.tempo;
      const ramp = 0.35 / tempo;
      const side = a.direction === 'right' ? -1 : 1; // subject's left (default) = image right = +yaw
      for (let i = 0; i < frames; i++) {
        const tau = i / fps - seg.start;
        if (tau <= 0 || tau >= len) continue;
        const p = out[i]!;
        const env = envelope(tau, len, ramp);
        const ph = tau / len;
        switch (a.kind) {
          case 'nod':
          case 'agree':
          case 'greet': {
            const n =
              a.kind === 'greet'
                ? (a.repeats ?? 1)
                : cyclesIn(len, 0.9 * tempo, a.repeats ?? (a.kind === 'agree' ? 2 : undefined));
            const amp = (a.kind === 'greet' ? 7 : 8) * I;
            p.pitch -= (amp * (1 - Math.cos(2 * Math.PI * n * ph))) / 2; // chin down and back, n times
            if (a.kind !== 'nod') {
              p.smile += (a.kind === 'greet' ? 0.8 : 0.4) * Math.min(1, I) * env;
              p.squint += (a.kind === 'greet' ? 0.3 : 0.15) * env;
            }
            if (a.kind === 'greet') p.brow += 0.5 * Math.sin(Math.PI * Math.min(1, tau / Math.min(0.8, len / 2)));
            break;
          }
          case 'shake':
          case 'disagree': {
            const n = cyclesIn(len, 0.9 * tempo, a.repeats ?? (a.kind === 'disagree' ? 2 : undefined));
            p.yaw += 10 * I * Math.sin(2 * Math.PI * n * ph) * env;
            if (a.kind === 'disagree') p.brow -= 0.45 * env;
            break;
          }
          case 'tilt':
            p.roll += side * 7 * I * env;
            break;
          case 'look': {
            const g = envelope(tau, len, ramp * 0.5); // the eyes lead the head
            if (a.direction === 'up') {
              p.pitch += 7 * I * env;
              p.gazeY -= 0.7 * g;
              p.brow += 0.2 * env;
            } else if (a.direction === 'down') {
              p.pitch -= 8 * I * env;
              p.gazeY += 0.6 * g;
            } else {
              p.yaw += side * 12 * I * env;
              p.gazeX += side * 0.7 * g;
            }
            break;
          }
          case 'smile':
            p.smile += Math.min(1, 0.8 * I) * env;
            p.squint += 0.3 * Math.min(1, I) * env;
            break;
          case 'laugh': {
            const bounce = Math.sin(2 * Math.PI * 3.5 * tempo * tau);
            p.smile += env;
            p.squint += 0.55 * env;
            p.pitch += (3 * I + 1.5 * I * bounce) * env;
            p.brow += 0.2 * env;
            break;
          }
          case 'brows':
            p.brow += Math.min(1, 0.85 * I) * env;
            break;
          case 'surprise':
            p.brow += Math.min(1, 1 * I) * env;
            p.blinkLeft -= 0.25 * env;
            p.blinkRight -= 0.25 * env;
            p.pitch += 2.5 * I * env;
            p.ty += 0.01 * I * env;
            break;
          case 'frown':
            p.brow -= Math.min(1, 0.75 * I) * env;
            p.pitch -= 1.5 * I * env;
            break;
          case 'think': {
            const g = envelope(tau, len, ramp * 0.6);
            p.gazeX += side * 0.6 * g;
            p.gazeY -= 0.6 * g;
            p.yaw += side * 6 * I * env;
            p.pitch += 4 * I * env;
            p.roll += side * 3 * I * env;
            p.brow -= 0.3 * env;
            break;
          }
          case 'listen': {
            const n = Math.max(1, Math.round(len * 0.5 * tempo));
            p.roll += 4.5 * I * env;
            p.pitch -= (1.5 + (1.5 * (1 - Math.cos(2 * Math.PI * n * ph))) / 2) * I * env;
            p.brow += 0.25 * env;
            break;
          }
          case 'blink': {
            const n = a.repeats ?? 1;
            for (let k = 0; k < n; k++) {
              const peak = Math.round((seg.start + (len * (k + 0.5)) / n) * fps) / fps;
              const b = blinkShape(i / fps - peak);
              p.blinkLeft = Math.max(p.blinkLeft, b);
              p.blinkRight = Math.max(p.blinkRight, b);
            }
            break;
          }
          case 'wink': {
            const peak = Math.round((seg.start + len / 2) * fps) / fps;
            const dt = i / fps - peak;
            const b = dt < 0 ? blinkShape(dt) : dt < 0.15 ? 1 : blinkShape(dt - 0.15);
            if (a.direction === 'right') p.blinkRight = Math.max(p.blinkRight, b);
            else p.blinkLeft = Math.max(p.blinkLeft, b);
            p.smile += 0.4 * env;
            p.squint += 0.2 * env;
            break;
          }
          case 'idle':
            break;
        }
      }
    }
  }
  return out;
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

function unique(xs: string[]): string[] {
  return [...new Set(xs.filter((x) => x.length > 0))];
}
