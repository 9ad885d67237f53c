/**
 * The viseme set: 15 mouth-shape classes (the widely used "Oculus" set) and the continuous mouth
 * parameters each one stands for. The renderer consumes the parameters; the classes are the vocabulary
 * shared by the phone path (TTS timings) and the audio path (the classifier in audio.ts).
 *
 * Parameters, each in [0, 1], 0 being the mouth at rest (render/synth/contract.ts says what each moves):
 *   open   the lips part and the jaw drops (small values: lips apart, teeth together)
 *   wide   lip spread, corners pulled back (as in "ee")
 *   round  lip rounding and protrusion (as in "oo")
 *   press  lips pressed together (p, b, m)
 *   tuck   lower lip under the upper teeth (f, v)
 */
export const VISEMES = [
  'sil',
  'PP',
  'FF',
  'TH',
  'DD',
  'kk',
  'CH',
  'SS',
  'nn',
  'RR',
  'aa',
  'E',
  'ih',
  'oh',
  'ou',
] as const;
export type Viseme = (typeof VISEMES)[number];

export interface MouthParams {
  open: number;
  wide: number;
  round: number;
  press: number;
  tuck: number;
}

/** The parameters of MouthParams, in the order the renderer takes them. */
export const MOUTH_PARAM_KEYS = [
  'open',
  'wide',
  'round',
  'press',
  'tuck',
] as const satisfies readonly (keyof MouthParams)[];

const shape = (open: number, wide: number, round: number, press = 0, tuck = 0): MouthParams => ({
  open,
  wide,
  round,
  press,
  tuck,
});

/** Mouth parameters of each viseme (targets; the track smooths between them). */
export const VISEME_PARAMS: Readonly<Record<Viseme, Readonly<MouthParams>>> = {
  sil: shape(0, 0, 0), // silence: closed, relaxed
  PP: shape(0, 0, 0.1, 1), // p b m: lips pressed together
  FF: shape(0.1, 0.15, 0, 0, 1), // f v: lower lip under the upper teeth
  TH: shape(0.2, 0.2, 0), // th dh: tongue between the teeth
  DD: shape(0.2, 0.25, 0), // t d: lips apart, teeth nearly together
  kk: shape(0.3, 0.2, 0), // k g ng
  CH: shape(0.2, 0, 0.6), // ch jh sh zh: lips forward
  SS: shape(0.12, 0.45, 0), // s z: teeth together
  nn: shape(0.2, 0.2, 0), // n l
  RR: shape(0.22, 0, 0.45), // r er
  aa: shape(0.75, 0.2, 0), // aa ae ah ax: open
  E: shape(0.5, 0.5, 0), // eh ey
  ih: shape(0.25, 0.7, 0), // ih iy y: spread
  oh: shape(0.55, 0, 0.6), // ao ow
  ou: shape(0.2, 0, 0.9), // uw uh w: small and round
};

/** Flite (CMU US English) phones to visemes. Diphthongs are two visemes, see DIPHTHONGS. */
const PHONE_VISEME: Readonly<Record<string, Viseme>> = {
  pau: 'sil',
  'h#': 'sil',
  brk: 'sil',
  p: 'PP',
  b: 'PP',
  m: 'PP',
  em: 'PP',
  f: 'FF',
  v: 'FF',
  th: 'TH',
  dh: 'TH',
  t: 'DD',
  d: 'DD',
  dx: 'DD',
  k: 'kk',
  g: 'kk',
  ng: 'kk',
  nx: 'kk',
  ch: 'CH',
  jh: 'CH',
  sh: 'CH',
  zh: 'CH',
  s: 'SS',
  z: 'SS',
  n: 'nn',
  l: 'nn',
  el: 'nn',
  en: 'nn',
  r: 'RR',
  er: 'RR',
  axr: 'RR',
  aa: 'aa',
  ae: 'aa',
  ah: 'aa',
  ax: 'aa',
  eh: 'E',
  ih: 'ih',
  iy: 'ih',
  y: 'ih',
  ao: 'oh',
  uw: 'ou',
  uh: 'ou',
  w: 'ou',
};

/** Diphthongs: first viseme for the first 60% of the phone, then the second. */
const DIPHTHONGS: Readonly<Record<string, readonly [Viseme, Viseme]>> = {
  ay: ['aa', 'ih'],
  aw: ['aa', 'ou'],
  ey: ['E', 'ih'],
  ow: ['oh', 'ou'],
  oy: ['oh', 'ih'],
};
const DIPHTHONG_SPLIT = 0.6;

export interface TimedPhone {
  phone: string;
  /** Seconds. */
  start: number;
  end: number;
}

export interface VisemeSegment {
  viseme: Viseme;
  start: number;
  end: number;
  /** The phone it comes from. */
  phone: string;
}

/** The viseme of one phone (a diphthong gives its first part; h takes the shape of the next vowel: see phonesToVisemes). */
export function phoneViseme(phone: string): Viseme {
  const p = phone.toLowerCase();
  return PHONE_VISEME[p] ?? DIPHTHONGS[p]?.[0] ?? (p === 'hh' || p === 'hv' ? 'aa' : 'sil');
}

/**
 * Flite's timed phones to timed visemes. Diphthongs become two segments; h (hh, hv) takes the viseme of
 * the vowel after it (the lips are already shaped for it); unknown phones count as silence.
 * Adjacent segments of the same viseme are merged.
 */
export function phonesToVisemes(phones: readonly TimedPhone[]): VisemeSegment[] {
  const out: VisemeSegment[] = [];
  const push = (viseme: Viseme, start: number, end: number, phone: string) => {
    if (!(end > start)) return;
    const last = out[out.length - 1];
    if (last && last.viseme === viseme && Math.abs(last.end - start) < 1e-9) last.end = end;
    else out.push({ viseme, start, end, phone });
  };
  phones.forEach((ph, i) => {
    const p = ph.phone.toLowerCase();
    const di = DIPHTHONGS[p];
    if (di) {
      const mid = ph.start + DIPHTHONG_SPLIT * (ph.end - ph.start);
      push(di[0], ph.start, mid, p);
      push(di[1], mid, ph.end, p);
    } else if (p === 'hh' || p === 'hv') {
      const next = phones[i + 1];
      const v = next ? phoneViseme(next.phone) : 'sil';
      push(['aa', 'E', 'ih', 'oh', 'ou', 'RR'].includes(v) ? v : 'aa', ph.start, ph.end, p);
    } else {
      push(phoneViseme(p), ph.start, ph.end, p);
    }
  });
  return out;
}

/** The viseme active at time t (seconds), or sil outside the segments. */
export function visemeAt(segments: readonly VisemeSegment[], t: number): Viseme {
  let lo = 0;
  let hi = segments.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const s = segments[mid] as VisemeSegment;
    if (t < s.start) hi = mid - 1;
    else if (t >= s.end) lo = mid + 1;
    else return s.viseme;
  }
  return 'sil';
}
