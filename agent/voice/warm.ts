/**
 * What a voice job process runs once before it takes a call, so that a call's first moments do not
 * pay for first runs: the VAD model's first inferences and the embedded TTS's start (its thread,
 * its WebAssembly, a voice's first synthesis). Measured before this, a worker's first reply took
 * 0.95-1.04 s to synthesise against 0.27-0.36 s for the later ones.
 */
import type { VAD } from '@livekit/agents';
import { AudioFrame } from '@livekit/rtc-node';
import { orAfter } from '../../core/platform/time.ts';
import { DEFAULT_VOICE, isVoice, synthesize, warmUpTts } from '../../render/tts/index.ts';

/** Half a second of silence through a VAD stream of the shared model, read to its end (at most 5 s). */
export async function warmVad(vad: VAD): Promise<void> {
  const stream = vad.stream();
  const rate = 16_000;
  const step = rate / 100;
  for (let i = 0; i < 50; i++) stream.pushFrame(new AudioFrame(new Int16Array(step), rate, 1, step));
  stream.endInput();
  const drained = (async () => {
    for await (const _ of stream) void _;
  })();
  await orAfter(drained, 5000, 'late' as const);
  stream.close();
}

/** The embedded TTS started and `voice` (a Flite voice name, else the default) synthesised once. */
export async function warmVoice(voice?: string | null): Promise<void> {
  const v = voice && isVoice(voice) ? voice : DEFAULT_VOICE;
  if (v === DEFAULT_VOICE) await warmUpTts([v]);
  else await synthesize({ text: 'Hello.', voice: v });
}
