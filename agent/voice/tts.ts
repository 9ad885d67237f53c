/**
 * The avatar's voice for agents-js: the embedded Flite TTS (offline, BSD) by default, or any
 * OpenAI-compatible speech endpoint when TTS_MODEL is set. Flite answers a whole sentence at once;
 * agents-js feeds it sentence by sentence (its StreamAdapter), so speech starts after the first
 * sentence of a streamed LLM reply.
 */
import { shortuuid, tts, type APIConnectOptions } from '@livekit/agents';
import * as openai from '@livekit/agents-plugin-openai';
import { AudioFrame } from '@livekit/rtc-node';
import type { Config } from '../../core/platform/config.ts';
import { DEFAULT_VOICE, VOICES, isVoice, synthesize, type Voice } from '../../render/tts/index.ts';

/** Frames of 20 ms, as LiveKit's own TTS plugins emit. */
const FRAME_MS = 20;

export class EmbeddedTTS extends tts.TTS {
  label = 'embedded.flite';

  constructor(readonly voice: Voice = DEFAULT_VOICE) {
    super(VOICES[voice].sampleRate, 1, { streaming: false });
  }

  synthesize(text: string, connOptions?: APIConnectOptions, abortSignal?: AbortSignal): tts.ChunkedStream {
    return new FliteStream(text, this, connOptions, abortSignal);
  }

  stream(): tts.SynthesizeStream {
    throw new Error('The embedded TTS is not a streaming TTS: agents-js wraps it sentence by sentence');
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
      const step = Math.round((speech.sampleRate * FRAME_MS) / 1000);
      for (let i = 0; i < speech.samples.length; i += step) {
        if (this.abortSignal.aborted) break;
        const part = speech.samples.slice(i, Math.min(speech.samples.length, i + step));
        this.queue.put({
          requestId,
          segmentId: requestId,
          frame: new AudioFrame(part, speech.sampleRate, 1, part.length),
          final: i + step >= speech.samples.length,
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
  return new EmbeddedTTS(voice);
}
