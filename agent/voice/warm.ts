/**
 * What a voice job process runs once before it takes a call, so that a call's first moments do not
 * pay for first runs: the VAD model's first inferences and the embedded TTS's start (its thread,
 * its WebAssembly, a voice's first synthesis). Measured before this, a worker's first reply took
 * 0.95-1.04 s to synthesise against 0.27-0.36 s for the later ones. And Node's own fetch, which
 * it loads and compiles on first use.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { llm, tts, VADEventType, type VAD } from '@livekit/agents';
import * as openai from '@livekit/agents-plugin-openai';
import { AudioFrame } from '@livekit/rtc-node';
import type OpenAI from 'openai';
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
 * The code of a reply, compiled before any call: a voice process takes one call, so its first
 * reply used to be each call's first run of the models' clients (the OpenAI SDK's request and its
 * streamed answer, agents-js's LLM and STT streams), of the TTS's clause-by-clause stream, and of
 * Node's fetch, which loads about 1 MB of JavaScript on first use and compiles its HTTP parser
 * (WebAssembly) on its first response. In `npm run bench -- conversation` every call's first reply
 * came 100-200 ms later than the next ones, each stage of it slower (the transcript, the first
 * token, the first audio); loading fetch alone had cost half a second of this thread as a call's
 * session started (a CPU profile of a worker's first call). One transcription and one streamed
 * chat with a server of this process's own, on loopback, through clients made as a call makes
 * them (`client(baseURL)`), and one streamed synthesis by `speaker` when given: nothing leaves the machine.
 */
export async function warmReplyPath(client: (baseURL: string) => OpenAI, speaker: tts.TTS | undefined): Promise<void> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url?.endsWith('/audio/transcriptions')) {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ text: 'Hello there.' }));
        return;
      }
      res.setHeader('content-type', 'text/event-stream');
      const chunk = (delta: object, finish: string | null) =>
        `data: ${JSON.stringify({ id: 'warm', object: 'chat.completion.chunk', created: 0, model: 'warm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(chunk({ role: 'assistant', content: 'Hello' }, null));
      res.write(chunk({ content: ' there, friend.' }, null));
      res.end(`${chunk({}, 'stop')}data: [DONE]\n\n`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  try {
    const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    const rate = 16_000;
    const speech = new openai.STT({ useRealtime: false, model: 'warm', apiKey: 'warm', client: client(baseURL) });
    await speech.recognize([new AudioFrame(new Int16Array(rate / 5), rate, 1, rate / 5)]);
    const chatCtx = llm.ChatContext.empty();
    chatCtx.addMessage({ role: 'user', content: 'Hello.' });
    const model = new openai.LLM({ model: 'warm', apiKey: 'warm', client: client(baseURL) });
    for await (const _ of model.chat({ chatCtx })) void _;
    if (speaker) {
      const stream = speaker.stream();
      stream.pushText('Hello there, friend. ');
      stream.endInput();
      for await (const ev of stream) if (ev === tts.SynthesizeStream.END_OF_STREAM) break;
      stream.close();
    }
  } finally {
    server.close();
  }
}
