/**
 * The avatar's voice for agents-js: the embedded Flite TTS (offline, BSD) by default, or any
 * OpenAI-compatible speech endpoint when TTS_MODEL is set. Flite answers a whole text at once; a
 * streamed LLM reply is fed to it piece by piece (agents-js's StreamAdapter): by default the first
 * clause as soon as it is written (`, ; :` or a sentence's end), then pieces of a sentence or more,
 * so speech starts after the first clause rather than the whole first sentence (AGENT_TTS_CLAUSES;
 * off: sentence by sentence, as agents-js does by itself).
 */
import { shortuuid, tokenize, tts, type APIConnectOptions } from '@livekit/agents';
import * as openai from '@livekit/agents-plugin-openai';
import { AudioFrame } from '@livekit/rtc-node';
import type { Config } from '../../core/platform/config.ts';
import { DEFAULT_VOICE, VOICES, isVoice, synthesize, type Voice } from '../../render/tts/index.ts';

/**
 * Frames of 300 ms. The avatar's audio output (agents-js's DataStreamAudioOutput) awaits each
 * frame's write to the data stream, some 15-40 ms on a busy machine: in the 20 ms frames LiveKit's
 * own plugins emit, a reply reached the avatar at about real time and started behind its start
 * buffer. In these, the first clause is there within a write or two.
 */
const FRAME_MS = 300;

/**
 * Flite opens every utterance with a pause, 160-250 ms below hearing: the first clause of a reply
 * would be heard that much later, and clauses would join with two pauses. Kept: this much before
 * the first audible sample (int16 amplitude over AUDIBLE).
 */
const LEAD_KEPT_MS = 30;
const AUDIBLE = 300;

/** `samples` from LEAD_KEPT_MS before their first audible sample (all of them when none is). */
function trimLeadingPause(samples: Int16Array, sampleRate: number): Int16Array {
  const first = samples.findIndex((v) => Math.abs(v) > AUDIBLE);
  if (first < 0) return samples;
  return samples.subarray(Math.max(0, first - Math.round((sampleRate * LEAD_KEPT_MS) / 1000)));
}

/** The first piece spoken is a clause of at least this many characters; the next ones, this many. */
const FIRST_PIECE_CHARS = 12;
const PIECE_CHARS = 60;

/** `text` cut after each clause and sentence end (`, ; : . ! ?` followed by a space), with positions. */
export function splitClauses(text: string): [string, number, number][] {
  const out: [string, number, number][] = [];
  let start = 0;
  for (const m of text.matchAll(/[,;:.!?]+(?=\s)/g)) {
    const end = m.index + m[0].length;
    const piece = text.slice(start, end).trim();
    if (piece) out.push([piece, start, end]);
    start = end;
  }
  const rest = text.slice(start).trim();
  if (rest) out.push([rest, start, text.length]);
  return out;
}

/** agents-js's sentence tokenizer, by clauses: the first piece as short as a clause, later ones a sentence or so. */
class ClauseTokenizer extends tokenize.SentenceTokenizer {
  tokenize(text: string): string[] {
    return splitClauses(text).map(([t]) => t);
  }

  stream(): tokenize.SentenceStream {
    return new tokenize.BufferedSentenceStream(splitClauses, PIECE_CHARS, 10, { firstTokenLength: FIRST_PIECE_CHARS });
  }
}

export class EmbeddedTTS extends tts.TTS {
  label = 'embedded.flite';
  private readonly pieces: tts.StreamAdapter | undefined;

  /** `clauses`: a streamed reply is spoken from its first clause on; otherwise agents-js feeds it sentence by sentence. */
  constructor(
    readonly voice: Voice = DEFAULT_VOICE,
    clauses = false,
  ) {
    super(VOICES[voice].sampleRate, 1, { streaming: clauses });
    this.pieces = clauses ? new tts.StreamAdapter(this, new ClauseTokenizer()) : undefined;
  }

  synthesize(text: string, connOptions?: APIConnectOptions, abortSignal?: AbortSignal): tts.ChunkedStream {
    return new FliteStream(text, this, connOptions, abortSignal);
  }

  stream(options?: { connOptions?: APIConnectOptions }): tts.SynthesizeStream {
    if (!this.pieces)
      throw new Error('The embedded TTS streams only by clauses: agents-js wraps it sentence by sentence');
    return this.pieces.stream(options);
  }
}

class FliteStream extends tts.ChunkedStream {
  label = 'embedded.flite';

  constructor(
    text: string,
    private readonly engine: EmbeddedTTS,
    connOptions?: APIConnectOptions,
    abortSignal?: AbortSignal,
  ) {
    super(text, engine, connOptions, abortSignal);
  }

  protected async run(): Promise<void> {
    const text = this.inputText.trim();
    const requestId = shortuuid('flite_');
    if (text.length > 0 && /[\p{L}\p{N}]/u.test(text)) {
      const speech = await synthesize({ text, voice: this.engine.voice });
      const samples = trimLeadingPause(speech.samples, speech.sampleRate);
      const step = Math.round((speech.sampleRate * FRAME_MS) / 1000);
      for (let i = 0; i < samples.length; i += step) {
        if (this.abortSignal.aborted) break;
        // A copy: the frame's whole buffer is what the data stream sends.
        const part = samples.slice(i, Math.min(samples.length, i + step));
        this.queue.put({
          requestId,
          segmentId: requestId,
          frame: new AudioFrame(part, speech.sampleRate, 1, part.length),
          final: i + step >= samples.length,
        });
      }
    }
    this.queue.close();
  }
}

/**
 * The TTS of a call: an OpenAI-compatible speech model when TTS_MODEL is set (the avatar's
 * defaultVoiceId, or TTS_VOICE, names the voice), the embedded Flite otherwise (a Flite voice
 * name as defaultVoiceId picks it).
 */
export function ttsFor(config: Config, defaultVoiceId: string | null): tts.TTS {
  if (config.TTS_MODEL) {
    return new openai.TTS({
      model: config.TTS_MODEL,
      voice: (defaultVoiceId ?? config.TTS_VOICE ?? 'alloy') as never,
      ...(config.OPENAI_BASE_URL ? { baseURL: config.OPENAI_BASE_URL } : {}),
      apiKey: config.OPENAI_API_KEY ?? 'unused',
    });
  }
  const voice = defaultVoiceId && isVoice(defaultVoiceId) ? defaultVoiceId : DEFAULT_VOICE;
  return new EmbeddedTTS(voice, config.AGENT_TTS_CLAUSES);
}
