/**
 * The lip-sync thread (see thread.ts): one engine, one batch at a time, frames shared with the
 * caller when they live in SharedArrayBuffers, copied otherwise.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { LipSyncModelError } from './contract.ts';
import { createLipSync, type LipSyncEngine, type LipSyncItem } from './engine.ts';
import type { ThreadError, ThreadInit, ThreadReply, ThreadRequest } from './thread.ts';

const port = parentPort!;
const init = workerData as ThreadInit;

function isShared(a: Uint8Array | Uint8ClampedArray | undefined): boolean {
  return a !== undefined && a.buffer instanceof SharedArrayBuffer;
}

function reply(message: ThreadReply, transfer: ArrayBuffer[] = []): void {
  port.postMessage(message, transfer);
}

function failure(err: unknown): ThreadError {
  if (err instanceof LipSyncModelError) return { name: err.name, message: err.message, model: err.model };
  return err instanceof Error ? { name: err.name, message: err.message } : { name: 'Error', message: String(err) };
}

let engine: LipSyncEngine;
try {
  engine = await createLipSync(init.choice, init.options);
  reply({ type: 'ready', kind: engine.kind, needsAudio: engine.needsAudio });
} catch (err) {
  reply({ type: 'failed', error: failure(err) });
  process.exit(0);
}

port.on('message', (request: ThreadRequest) => {
  if (request.type === 'release') {
    void engine.release().finally(() => port.close());
    return;
  }
  if (request.type === 'renderI420') {
    engine.renderI420(request.items).then(
      () => reply({ type: 'rendered', id: request.id, frames: [] }),
      (err: unknown) => reply({ type: 'rendered', id: request.id, error: failure(err) }),
    );
    return;
  }
  const items = request.items as LipSyncItem[];
  engine.renderFrames(items).then(
    (frames) => {
      // A frame drawn into a shared target is already where the caller reads it; any other goes back (moved, not copied).
      const out = frames.map((f, i) => (isShared(items[i]!.target) && f === items[i]!.target ? null : f));
      const transfer = out
        .filter((f): f is Uint8Array => f !== null && !isShared(f))
        .map((f) => f.buffer as ArrayBuffer);
      reply({ type: 'rendered', id: request.id, frames: out }, transfer);
    },
    (err: unknown) => reply({ type: 'rendered', id: request.id, error: failure(err) }),
  );
});
