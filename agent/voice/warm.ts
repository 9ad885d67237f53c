/**
 * What a voice job process runs once before it takes a call, so that a call's first moments do not
 * pay for first runs: the VAD model's first inferences and the embedded TTS's start (its thread,
 * its WebAssembly, a voice's first synthesis). Measured before this, a worker's first reply took
 * 0.95-1.04 s to synthesise against 0.27-0.36 s for the later ones. And Node's own fetch, which
 * it loads and compiles on first use.
 */
import { VADEventType, type VAD } from '@livekit/agents';
import { AudioFrame } from '@livekit/rtc-node';
import { orAfter } from '../../core/platform/time.ts';
import { DEFAULT_VOICE, isVoice, synthesize, warmUpTts } from '../../render/tts/index.ts';

/** A few inferences of the shared VAD model on silence (at most 2 s: the stream is not ended, only closed). */
export async function warmVad(vad: VAD): Promise<void> {
  const stream = vad.stream();
  const rate = 16_000;
  const step = rate / 100;
  for (let i = 0; i < 20; i++) stream.pushFrame(new AudioFrame(new Int16Array(step), rate, 1, step));
  const inferred = (async () => {
    let runs = 0;
    for await (const e of stream) if (e.type === VADEventType.INFERENCE_DONE && ++runs >= 3) return;
  })();
  await orAfter(inferred, 2000, 'late' as const);
  stream.close();
}

/** The embedded TTS started and `voice` (a Flite voice name, else the default) synthesised once. */
export async function warmVoice(voice?: string | null): Promise<void> {
  const v = voice && isVoice(voice) ? voice : DEFAULT_VOICE;
  if (v === DEFAULT_VOICE) await warmUpTts([v]);
  else await synthesize({ text: 'Hello.', voice: v });
}

/**
 * Node's fetch (undici, about 1 MB of JavaScript) is loaded and compiled on its first use. A call's
 * first request to the models comes as its voice session starts, just before the greeting: that
 * cost half a second of the job's main thread there (a CPU profile of a worker's first call). A
 * data: URL loads fetch, its Response and bodies; a request that a closed loopback port refuses
 * loads its connection pool. Nothing leaves the machine.
 */
export async function warmFetch(): Promise<void> {
  await (await fetch('data:,')).text();
  await fetch('http://127.0.0.1:9/', { signal: AbortSignal.timeout(1000) }).then(
    (res) => res.body?.cancel(),
    () => undefined,
  );
}
