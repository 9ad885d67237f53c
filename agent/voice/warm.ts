/**
 * What a voice job process runs once before it takes a call, so that a call's first moments do not
 * pay for first runs: the VAD model's first inferences and the embedded TTS's start (its thread,
 * its WebAssembly, a voice's first synthesis). Measured before this, a worker's first reply took
 * 0.95-1.04 s to synthesise against 0.27-0.36 s for the later ones. And Node's own fetch, which
 * it loads and compiles on first use.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
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
 * Node's fetch (undici, about 1 MB of JavaScript) is loaded and compiled on its first use, and its
 * HTTP parser (WebAssembly) on its first response. A call's first request to the models comes as
 * its voice session starts, just before the greeting: loading fetch cost half a second of the job's
 * main thread there (a CPU profile of a worker's first call), and the parser is compiled on the
 * first response (36 ms of CPU on an idle machine, several times that in a call's busy start). One
 * exchange with a server of this process's own, on loopback, runs both; nothing leaves the machine.
 */
export async function warmFetch(): Promise<void> {
  const server = createServer((_req, res) => res.end('{}'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  try {
    const { port } = server.address() as AddressInfo;
    await (await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(2000) })).text();
  } finally {
    server.close();
  }
}
