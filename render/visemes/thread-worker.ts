/**
 * The audio viseme thread (see thread.ts): one AudioVisemeStream per open stream, each stream's
 * calls run in order, on the shared session of the viseme model.
 */
import { parentPort } from 'node:worker_threads';
import { AudioVisemeStream, audioVisemeSession, releaseAudioVisemes } from './audio.ts';
import type { MouthFrame } from './track.ts';
import type { VisemeThreadReply, VisemeThreadRequest } from './thread.ts';

const port = parentPort!;
/** Open streams; one whose options were refused keeps the reason, for its calls. */
const streams = new Map<number, { stream: AudioVisemeStream | null; refused?: string; chain: Promise<unknown> }>();

function reply(message: VisemeThreadReply): void {
  port.postMessage(message);
}

/** Runs `work` after the stream's earlier calls and answers call `call` with its frames or its error. */
function answer(stream: number, call: number, work: (s: AudioVisemeStream) => Promise<MouthFrame[]>): void {
  const entry = streams.get(stream);
  if (!entry)
    return reply({ type: 'frames', call, error: 'no such audio viseme stream (never opened, ended or closed)' });
  if (!entry.stream) return reply({ type: 'frames', call, error: entry.refused! });
  const s = entry.stream;
  entry.chain = entry.chain
    .then(() => work(s))
    .then(
      (frames) => reply({ type: 'frames', call, frames }),
      (err: unknown) => reply({ type: 'frames', call, error: err instanceof Error ? err.message : String(err) }),
    );
}

port.on('message', (m: VisemeThreadRequest) => {
  switch (m.type) {
    case 'open':
      try {
        streams.set(m.stream, { stream: new AudioVisemeStream(m.options), chain: Promise.resolve() });
      } catch (err) {
        streams.set(m.stream, {
          stream: null,
          refused: err instanceof Error ? err.message : String(err),
          chain: Promise.resolve(),
        });
      }
      return;
    case 'push':
      return answer(m.stream, m.call, (s) => s.push(m.samples));
    case 'end':
      answer(m.stream, m.call, (s) => s.end());
      streams.delete(m.stream);
      return;
    case 'close':
      streams.delete(m.stream);
      return;
    case 'release':
      void releaseAudioVisemes().finally(() => port.close());
      return;
  }
});

// Loaded before the first stream, so a call's first analysis does not wait for the model.
await audioVisemeSession();
reply({ type: 'ready' });
