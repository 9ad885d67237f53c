/**
 * A lip-sync engine in a worker thread. The engine's work (the mouth graph in onnxruntime, whose
 * `run` blocks the calling thread, and the composite) then leaves the caller's event loop free
 * for audio, networking and publishing, and uses a second core.
 *
 *   const lipsync = await createLipSyncThread('builtin');
 *   const frame = { data: sharedRgba, width, height };        // sharedRgba on a SharedArrayBuffer
 *   await lipsync.renderFrames([{ frame, face, shape, target: sharedRgba }]);
 *
 * Frames and targets on SharedArrayBuffers are drawn in place (nothing copied); any other frame is
 * copied to the thread and its result back. `renderI420` takes shared frames only, so the caller's
 * event loop does none of the drawing; a frame's audio (FrameAudio) may be shared too, and the
 * thread computes its mel window. `prepare` runs in the caller (pure arithmetic). A thread that dies fails the batches it
 * had and is started again for the next batch.
 */
import type { Worker } from 'node:worker_threads';
import type { FaceRig } from '../rig/types.ts';
import { OnDemandThread, startThread } from '../threads.ts';
import { LipSyncModelError, parseLipSyncChoice, type LipSyncChoice } from './contract.ts';
import {
  prepareLipSyncFace,
  type LipSyncEngine,
  type LipSyncFace,
  type LipSyncI420Item,
  type LipSyncItem,
  type LipSyncOptions,
} from './engine.ts';

/** What the thread is started with. */
export interface ThreadInit {
  choice: LipSyncChoice;
  options: LipSyncOptions;
}

export type ThreadRequest =
  | { type: 'render'; id: number; items: readonly LipSyncItem[] }
  | { type: 'renderI420'; id: number; items: readonly LipSyncI420Item[] }
  | { type: 'release' };

export interface ThreadError {
  name: string;
  message: string;
  /** The model of a LipSyncModelError. */
  model?: string;
}

export type ThreadReply =
  | { type: 'ready'; kind: LipSyncEngine['kind']; needsAudio: boolean }
  | { type: 'failed'; error: ThreadError }
  | { type: 'rendered'; id: number; frames?: (Uint8Array | Uint8ClampedArray | null)[]; error?: ThreadError };

const THREAD_CODE = new URL('./thread-worker.ts', import.meta.url);

type Frames = (Uint8Array | Uint8ClampedArray)[];

interface Pending {
  /** The items of a `render` request (where its frames go back); none for `renderI420`. */
  items: readonly LipSyncItem[];
  resolve(frames: Frames): void;
  reject(err: Error): void;
}

function errorFrom(e: ThreadError): Error {
  const err = e.model !== undefined ? new LipSyncModelError(e.message, e.model) : new Error(e.message);
  err.name = e.name;
  return err;
}

interface Thread {
  worker: Worker;
  ready: Promise<{ kind: LipSyncEngine['kind']; needsAudio: boolean }>;
}

export async function createLipSyncThread(
  choice: LipSyncChoice | string | undefined,
  options: LipSyncOptions = {},
): Promise<LipSyncEngine> {
  const init: ThreadInit = { choice: typeof choice === 'object' ? choice : parseLipSyncChoice(choice), options };
  const pending = new Map<number, Pending>();
  let nextId = 0;

  const start = (): Thread => {
    const worker = startThread(THREAD_CODE, init);
    const ready = new Promise<{ kind: LipSyncEngine['kind']; needsAudio: boolean }>((resolve, reject) => {
      worker.on('message', (reply: ThreadReply) => {
        if (reply.type === 'ready') resolve(reply);
        else if (reply.type === 'failed') reject(errorFrom(reply.error));
        else settle(reply);
      });
      worker.once('error', (err) => {
        reject(err);
        fail(err);
      });
      worker.once('exit', (code) => {
        const err = new Error(`the lip-sync thread exited (code ${code})`);
        reject(err);
        fail(err);
        threads.exited(worker);
      });
    });
    return { worker, ready };
  };

  const settle = (reply: Extract<ThreadReply, { type: 'rendered' }>) => {
    const p = pending.get(reply.id);
    if (!p) return;
    pending.delete(reply.id);
    if (reply.error) return p.reject(errorFrom(reply.error));
    p.resolve(
      reply.frames!.map((f, i) => {
        const target = p.items[i]!.target;
        if (f === null) return target!;
        if (!target) return f;
        target.set(f);
        return target;
      }),
    );
  };

  const fail = (err: Error) => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };

  const threads = new OnDemandThread(start, 'this lip-sync engine');
  const { kind, needsAudio } = await threads.get().ready;

  const send = async (request: (id: number) => ThreadRequest, items: readonly LipSyncItem[]): Promise<Frames> => {
    const thread = threads.get();
    await thread.ready;
    const id = nextId++;
    return new Promise<Frames>((resolve, reject) => {
      pending.set(id, { items, resolve, reject });
      thread.worker.postMessage(request(id));
    });
  };

  return {
    kind,
    needsAudio,
    prepare: (rig: FaceRig): LipSyncFace => prepareLipSyncFace(kind, rig),
    async renderFrames(items) {
      if (items.length === 0 && !threads.isReleased) return [];
      return send((id) => ({ type: 'render', id, items }), items);
    },
    async renderI420(items) {
      if (items.length === 0 && !threads.isReleased) return;
      // Posted, a buffer that is not shared would be copied, and the drawing lost.
      if (items.some((it) => !(it.i420.buffer instanceof SharedArrayBuffer))) {
        throw new TypeError('renderI420 in a lip-sync thread draws in place: i420 must be on a SharedArrayBuffer');
      }
      await send((id) => ({ type: 'renderI420', id, items }), []);
    },
    release: () => threads.release(),
  };
}
