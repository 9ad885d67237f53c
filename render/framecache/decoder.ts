/**
 * Stored frames decoded to I420, what a live call publishes. A JPEG's decode runs on libuv's
 * thread pool, but its conversion to I420 (JavaScript) and the buffers it fills do not: on a
 * worker's event loop they cost 2 to 5 ms a frame, and in a fresh worker's first call, whose idle
 * loop decodes each frame as it first plays, they made the event-loop stalls that skipped frames.
 * The decoder thread does both off the event loop; the in-process decoder serves tests and tools.
 */
import type { Worker } from 'node:worker_threads';
import { rgbaToI420 } from '../encode/index.ts';
import { OnDemandThread, startThread } from '../threads.ts';
import { decodeFrame } from './reader.ts';

export interface FrameDecoder {
  /** A stored JPEG frame as I420 (a buffer of its own). */
  jpegToI420(jpeg: Uint8Array, width: number, height: number): Promise<Uint8Array>;
  release(): Promise<void>;
}

/** Decodes on the calling thread. */
export const inProcessFrameDecoder: FrameDecoder = {
  jpegToI420: async (jpeg, width, height) => rgbaToI420(await decodeFrame(jpeg, 'jpeg', width, height), width, height),
  release: async () => {},
};

/** What the decoder thread is asked and answers (decoder-thread.ts). */
export type DecoderRequest =
  { type: 'decode'; id: number; jpeg: Uint8Array; width: number; height: number } | { type: 'release' };
export type DecoderReply = { id: number; i420: Uint8Array } | { id: number; error: { name: string; message: string } };

const THREAD_CODE = new URL('./decoder-thread.ts', import.meta.url);

/** Decodes in a thread of its own, started again if it dies. */
export function createFrameDecoderThread(): FrameDecoder {
  const pending = new Map<number, { resolve(i420: Uint8Array): void; reject(err: Error): void }>();
  let nextId = 0;
  const fail = (err: Error) => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  const threads = new OnDemandThread((): { worker: Worker } => {
    const worker = startThread(THREAD_CODE);
    worker.on('message', (reply: DecoderReply) => {
      const p = pending.get(reply.id);
      if (!p) return;
      pending.delete(reply.id);
      if ('i420' in reply) p.resolve(reply.i420);
      else p.reject(Object.assign(new Error(reply.error.message), { name: reply.error.name }));
    });
    worker.once('error', fail);
    worker.once('exit', (code) => {
      fail(new Error(`the frame decoder thread exited (code ${code})`));
      threads.exited(worker);
    });
    return { worker };
  }, 'this frame decoder');
  return {
    jpegToI420(jpeg, width, height) {
      const { worker } = threads.get();
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        // A copy of the frame's bytes alone, moved to the thread: a view (a Buffer's slice too) would
        // carry its whole file, and moving it would take the file from its cache.
        const own = new Uint8Array(jpeg);
        const request: DecoderRequest = { type: 'decode', id, jpeg: own, width, height };
        worker.postMessage(request, [own.buffer]);
      });
    },
    release: () => threads.release(),
  };
}
