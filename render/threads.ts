/**
 * Worker threads of the render engine (the lip-sync thread, the audio viseme thread): started
 * through render/thread-entry.mjs, which registers the TypeScript loader a worker does not inherit
 * from a test runner, and stopped by asking the thread's code to release what it holds.
 */
import { Worker } from 'node:worker_threads';

const ENTRY = new URL('./thread-entry.mjs', import.meta.url);

/** Starts the thread whose code is `code` (a .ts module URL), with `workerData`. */
export function startThread(code: URL, workerData?: unknown): Worker {
  return new Worker(ENTRY, { workerData, argv: [code.href] });
}

/** Stops a thread: posts `{ type: 'release' }` (the thread lets go and exits), then terminates it if it has not exited within 2 s. */
async function stopThread(worker: Worker): Promise<void> {
  const exited = new Promise((r) => worker.once('exit', r));
  worker.postMessage({ type: 'release' });
  await Promise.race([exited, new Promise((r) => setTimeout(r, 2000).unref())]);
  await worker.terminate();
}

/**
 * A thread started on demand and again after it dies (its owner calls `exited` from the worker's
 * exit handler), until it is released for good.
 */
export class OnDemandThread<T extends { worker: Worker }> {
  private current: T | null = null;
  private released = false;

  constructor(
    /** Starts a thread (its worker and whatever the owner keeps with it). */
    private readonly start: () => T,
    /** What the owner is called in errors ("this lip-sync engine"). */
    private readonly name: string,
  ) {}

  get isReleased(): boolean {
    return this.released;
  }

  /** The running thread, started if there is none. Throws once released. */
  get(): T {
    if (this.released) throw new Error(`${this.name} was released`);
    return (this.current ??= this.start());
  }

  /** Whether `thread` is still the running one (not dead, not replaced). */
  holds(thread: T): boolean {
    return this.current === thread;
  }

  /** `worker` exited: the next `get` starts another thread. */
  exited(worker: Worker): void {
    if (this.current?.worker === worker) this.current = null;
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    const t = this.current;
    this.current = null;
    if (t) await stopThread(t.worker);
  }
}
