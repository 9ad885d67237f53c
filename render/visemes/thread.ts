/**
 * Audio viseme streams analysed in a worker thread. onnxruntime's `run` blocks the thread that
 * calls it; a live call's event loop paces audio and publishes frames, so its speech is analysed
 * here instead, every call's streams in one thread (one session of the viseme model).
 *
 *   const visemes = await createAudioVisemeThread();
 *   const stream = visemes.open({ sampleRate: 24000, fps: 25 });   // as new AudioVisemeStream(...)
 *   frames.push(...(await stream.push(pcm)));                      // calls in order, each awaited
 *   frames.push(...(await stream.end()));                          // or stream.close() to drop it
 *
 * A thread that dies fails the calls it had (their streams are lost) and is started again for the
 * next stream opened.
 */
import type { Worker } from 'node:worker_threads';
import { OnDemandThread, startThread } from '../threads.ts';
import type { AudioVisemeStreamOptions } from './audio.ts';
import type { MouthFrame } from './track.ts';

export type VisemeThreadRequest =
  | { type: 'open'; stream: number; options: Omit<AudioVisemeStreamOptions, 'session'> }
  | { type: 'push'; stream: number; call: number; samples: Int16Array | Float32Array }
  | { type: 'end'; stream: number; call: number }
  | { type: 'close'; stream: number }
  | { type: 'release' };

export type VisemeThreadReply =
  { type: 'ready' } | { type: 'frames'; call: number; frames?: MouthFrame[]; error?: string };

/** One stream in the thread: AudioVisemeStream's push and end, and close to let it go unfinished. */
interface ThreadVisemeStream {
  push(samples: Int16Array | Float32Array): Promise<MouthFrame[]>;
  /** Flushes the last frames; the stream is then gone from the thread. */
  end(): Promise<MouthFrame[]>;
  /** Drops the stream (an interrupted segment); calls still queued finish first. */
  close(): void;
}

export interface AudioVisemeThread {
  open(options: Omit<AudioVisemeStreamOptions, 'session'>): ThreadVisemeStream;
  release(): Promise<void>;
}

const THREAD_CODE = new URL('./thread-worker.ts', import.meta.url);

export async function createAudioVisemeThread(): Promise<AudioVisemeThread> {
  const pending = new Map<number, { resolve(frames: MouthFrame[]): void; reject(err: Error): void }>();
  let nextStream = 0;
  let nextCall = 0;

  const fail = (err: Error) => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };

  const start = (): { worker: Worker; ready: Promise<void> } => {
    const worker = startThread(THREAD_CODE);
    const ready = new Promise<void>((resolve, reject) => {
      worker.on('message', (reply: VisemeThreadReply) => {
        if (reply.type === 'ready') return resolve();
        const p = pending.get(reply.call);
        if (!p) return;
        pending.delete(reply.call);
        if (reply.error !== undefined) p.reject(new Error(reply.error));
        else p.resolve(reply.frames!);
      });
      worker.once('error', (err) => {
        reject(err);
        fail(err);
      });
      worker.once('exit', (code) => {
        const err = new Error(`the audio viseme thread exited (code ${code})`);
        reject(err);
        fail(err);
        threads.exited(worker);
      });
    });
    // Threads wait for nothing of ours: an idle analysis thread must not keep the process alive.
    worker.unref();
    return { worker, ready };
  };

  const threads = new OnDemandThread(start, 'this audio viseme thread');
  await threads.get().ready;

  return {
    open(options) {
      const t = threads.get();
      const stream = nextStream++;
      t.worker.postMessage({ type: 'open', stream, options } satisfies VisemeThreadRequest);
      const call = (request: (call: number) => VisemeThreadRequest) =>
        new Promise<MouthFrame[]>((resolve, reject) => {
          if (!threads.holds(t)) return reject(new Error('the audio viseme thread that held this stream is gone'));
          const id = nextCall++;
          pending.set(id, { resolve, reject });
          t.worker.postMessage(request(id));
        });
      return {
        push: (samples) => call((id) => ({ type: 'push', stream, call: id, samples })),
        end: () => call((id) => ({ type: 'end', stream, call: id })),
        close: () => {
          if (threads.holds(t)) t.worker.postMessage({ type: 'close', stream } satisfies VisemeThreadRequest);
        },
      };
    },
    release: () => threads.release(),
  };
}
