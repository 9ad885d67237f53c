import { TtsError } from './errors.ts';
import { FLITE_OUT_WAV, FliteEngine } from './flite.ts';

/**
 * Voices built into flite.wasm (checked with `flite -lv`; `awb_time` is a talking clock and left out).
 * `stretch` is the voice's own duration_stretch (measured: kal's phones are 1.1x the unstretched length).
 */
export const VOICES = {
  slt: { sampleRate: 16000, kind: 'clustergen', stretch: 1, description: 'US English, female' },
  rms: { sampleRate: 16000, kind: 'clustergen', stretch: 1, description: 'US English, male' },
  awb: { sampleRate: 16000, kind: 'clustergen', stretch: 1, description: 'Scottish English, male' },
  kal16: {
    sampleRate: 16000,
    kind: 'diphone',
    stretch: 1.1,
    description: 'US English, male, diphone (fastest at 16 kHz)',
  },
  kal: { sampleRate: 8000, kind: 'diphone', stretch: 1.1, description: 'US English, male, diphone, 8 kHz (fastest)' },
} as const;

export type Voice = keyof typeof VOICES;
export const VOICE_NAMES = Object.keys(VOICES) as Voice[];
export const DEFAULT_VOICE: Voice = 'slt';

/** Longest text accepted by one call, in characters (the limit of OpenAI's speech endpoint). */
export const MAX_TEXT_CHARS = 4096;

export interface Phone {
  /** Flite's US English phone name (CMU set: aa, ae, ah, ..., zh) or `pau` for silence. */
  phone: string;
  /** Seconds from the start of the returned audio. */
  start: number;
  end: number;
}

export interface SynthesisResult {
  voice: Voice;
  sampleRate: number;
  /** Mono, 16-bit PCM. */
  samples: Int16Array;
  /** Contiguous phones from 0 to `durationSeconds` (flite's own segment timings, from `-psdur`). */
  phones: Phone[];
  durationSeconds: number;
  /** Wall time of flite's synthesis inside the worker, in milliseconds. */
  synthesisMs: number;
}

export interface SynthesizeRequest {
  text: string;
  voice?: Voice | string;
  /** Speaking rate, 1 = the voice's own; MIN_SPEED to MAX_SPEED (flite's duration_stretch = the voice's / speed). */
  speed?: number;
}

const MIN_SPEED = 0.5;
const MAX_SPEED = 2;

let shared: FliteEngine | null = null;

/** The process-wide engine that synthesize() uses (one worker thread). */
export function sharedEngine(): FliteEngine {
  shared ??= new FliteEngine({ workers: 1 });
  return shared;
}

/**
 * Starts the shared engine (compiles flite.wasm, starts its worker) and speaks a word with each given voice
 * so that the first turn pays neither for compilation nor for the voice's first, slower run.
 */
export async function warmUpTts(voices: readonly Voice[] = [DEFAULT_VOICE]): Promise<void> {
  const engine = sharedEngine();
  await engine.warmUp();
  for (const voice of voices) await synthesize({ text: 'Hello.', voice }, engine);
}

/** Stops the shared engine's worker; a later call starts a new one. */
export async function closeTts(): Promise<void> {
  const e = shared;
  shared = null;
  await e?.close();
}

export function isVoice(v: string): v is Voice {
  return Object.prototype.hasOwnProperty.call(VOICES, v);
}

/**
 * What flite is given: Unicode folded to ASCII (accents stripped, typographic quotes and dashes
 * replaced), control characters and other non-ASCII removed, whitespace collapsed.
 */
export function normalizeText(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .replace(/[\u2018\u2019\u201a\u2032]/g, "'")
    .replace(/[\u201c\u201d\u201e\u2033]/g, '"')
    .replace(/[\u2010-\u2015\u2212]/g, '-')
    .replace(/\u2026/g, '...')
    .replace(/[^\x20-\x7e]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The request as flite gets it (text folded to ASCII), or the TtsError refusing it. */
export function checkRequest(req: SynthesizeRequest): { text: string; voice: Voice; speed: number } {
  const voice = req.voice ?? DEFAULT_VOICE;
  const speed = req.speed ?? 1;
  if (typeof speed !== 'number' || !(speed >= MIN_SPEED && speed <= MAX_SPEED)) {
    throw new TtsError('invalid_speed', `speed must be a number from ${MIN_SPEED} to ${MAX_SPEED}`, {
      details: { min: MIN_SPEED, max: MAX_SPEED },
    });
  }
  if (!isVoice(voice)) {
    throw new TtsError(
      'unknown_voice',
      `unknown voice "${String(voice).slice(0, 40)}"; use one of ${VOICE_NAMES.join(', ')}`,
      {
        details: { voice: String(voice).slice(0, 40) },
      },
    );
  }
  if (typeof req.text !== 'string') throw new TtsError('empty_text', 'text must be a string');
  if (req.text.length > MAX_TEXT_CHARS) {
    throw new TtsError('text_too_long', `text is ${req.text.length} characters; the limit is ${MAX_TEXT_CHARS}`, {
      details: { length: req.text.length, limit: MAX_TEXT_CHARS },
    });
  }
  const text = normalizeText(req.text);
  if (!/[A-Za-z0-9]/.test(text)) throw new TtsError('empty_text', 'text has nothing to speak (no letters or digits)');
  return { text, voice, speed };
}

/**
 * Speaks `text` with a built-in Flite voice. Returns the audio and flite's exact phone timings.
 * Throws TtsError: empty_text, text_too_long, unknown_voice, invalid_speed, synthesis_failed.
 */
export async function synthesize(
  req: SynthesizeRequest,
  engine: FliteEngine = sharedEngine(),
): Promise<SynthesisResult> {
  const { text, voice, speed } = checkRequest(req);
  const args = ['-voice', voice, '-psdur'];
  if (speed !== 1) args.push('--setf', `duration_stretch=${(VOICES[voice].stretch / speed).toFixed(4)}`);
  const run = await engine.run([...args, '-t', text, '-o', FLITE_OUT_WAV]);
  if (run.exitCode !== 0 || !run.wav) {
    throw new TtsError(
      'synthesis_failed',
      `flite exited with code ${run.exitCode}: ${run.stderr.trim().slice(0, 200)}`,
    );
  }
  const { sampleRate, samples } = parseWav(run.wav);
  const durationSeconds = samples.length / sampleRate;
  return {
    voice,
    sampleRate,
    samples,
    phones: parsePhoneTimings(run.stdout, durationSeconds),
    durationSeconds,
    synthesisMs: run.runMs,
  };
}

/**
 * Parses flite's `-psdur` output ("pau:0.220 hh:0.295 ...", each phone with its end time) into
 * contiguous phones. The last phone is made to end exactly at `durationSeconds`: flite's diphone
 * voices (kal, kal16) report a final pause about 0.1 s longer than the audio they write.
 */
export function parsePhoneTimings(stdout: string, durationSeconds: number): Phone[] {
  const phones: Phone[] = [];
  let start = 0;
  for (const m of stdout.matchAll(/(?:^|\s)([a-z#]+):(\d+(?:\.\d+)?)(?=\s|$)/g)) {
    const end = Math.min(Number(m[2]), durationSeconds);
    if (end <= start) continue;
    phones.push({ phone: m[1] as string, start, end });
    start = end;
  }
  const last = phones[phones.length - 1];
  if (last) last.end = durationSeconds;
  else if (durationSeconds > 0) phones.push({ phone: 'pau', start: 0, end: durationSeconds });
  return phones;
}

/** Reads a RIFF/WAVE file of mono 16-bit PCM (what flite writes). */
export function parseWav(bytes: Uint8Array): { sampleRate: number; samples: Int16Array } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tag = (o: number) =>
    String.fromCharCode(bytes[o] ?? 0, bytes[o + 1] ?? 0, bytes[o + 2] ?? 0, bytes[o + 3] ?? 0);
  if (bytes.length < 12 || tag(0) !== 'RIFF' || tag(8) !== 'WAVE')
    throw new TtsError('synthesis_failed', 'flite wrote no WAV file');
  let sampleRate = 0;
  let channels = 0;
  let bits = 0;
  let o = 12;
  while (o + 8 <= bytes.length) {
    const id = tag(o);
    const size = view.getUint32(o + 4, true);
    const body = o + 8;
    if (id === 'fmt ') {
      channels = view.getUint16(body + 2, true);
      sampleRate = view.getUint32(body + 4, true);
      bits = view.getUint16(body + 14, true);
    } else if (id === 'data') {
      if (channels !== 1 || bits !== 16 || sampleRate <= 0) {
        throw new TtsError('synthesis_failed', `unexpected WAV format (${channels} channels, ${bits} bits)`);
      }
      const n = Math.floor(Math.min(size, bytes.length - body) / 2);
      const samples = new Int16Array(n);
      for (let i = 0; i < n; i++) samples[i] = view.getInt16(body + 2 * i, true);
      return { sampleRate, samples };
    }
    o = body + size + (size & 1);
  }
  throw new TtsError('synthesis_failed', 'flite wrote a WAV file with no data');
}

/**
 * Splits text into sentences for streaming synthesis: at . ! ? ; : followed by a space, and at line
 * breaks; a sentence longer than `maxChars` is cut at the last comma or space before the limit.
 */
export function splitSentences(text: string, maxChars = 240): string[] {
  const out: string[] = [];
  for (const part of text.split(/(?<=[.!?;:])\s+|\n+/)) {
    let s = part.trim();
    while (s.length > maxChars) {
      const head = s.slice(0, maxChars);
      let cut = Math.max(head.lastIndexOf(', '), head.lastIndexOf('; '));
      if (cut < maxChars / 3) cut = head.lastIndexOf(' ');
      if (cut <= 0) cut = maxChars;
      out.push(s.slice(0, cut + 1).trim());
      s = s.slice(cut + 1).trim();
    }
    if (/[A-Za-z0-9]/.test(s)) out.push(s);
    else if (s && out.length > 0) out[out.length - 1] += ` ${s}`;
  }
  return out;
}

export interface SynthesisChunk extends SynthesisResult {
  /** The sentence this chunk speaks. */
  text: string;
  /** Start of this chunk in the whole utterance, in seconds (chunks are back to back). */
  offsetSeconds: number;
}
