/**
 * ONNX Runtime sessions of the render models (rig, visemes, mouth synthesis, lip sync): one set of
 * session options, and models loaded once per process.
 */
import type * as ort from 'onnxruntime-node';

// ONNX Runtime (1.29 and later) reports usage to Microsoft from Linux too unless this is set: loading
// it opens /tmp/mat-debug-<pid>.log, and its first session writes a device id under
// ~/.cache/Microsoft and a `.ses` file in the working directory, then posts to
// mobile.events.data.microsoft.com. A self-hosted service phones no one. `runtime.ts` loads the
// runtime after this module; child processes (the voice agent's VAD) inherit the setting. An
// operator's own value is kept.
process.env.ORT_DISABLE_TELEMETRY ??= '1';

export type ExecutionProvider = 'cpu' | 'cuda';

/** `threads` threads for one graph run; CUDA falls back to the CPU for the operators it lacks. */
export function sessionOptions(ep: ExecutionProvider, threads: number): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: ep === 'cuda' ? ['cuda', 'cpu'] : ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  };
}

export interface LoadedOnce<T> {
  /** The value, loaded on the first call; concurrent first callers share one load. */
  get(): Promise<T>;
  /** Drops the value and disposes of it (tests, shutdown); the next `get` loads it again. */
  release(): Promise<void>;
}

/** A value (model sessions) loaded once per process and shared by every caller. A failed load is not kept: the next call retries. */
export function loadedOnce<T>(load: () => Promise<T>, dispose: (value: T) => Promise<void>): LoadedOnce<T> {
  let loading: Promise<T> | undefined;
  return {
    get() {
      loading ??= load().catch((err: unknown) => {
        loading = undefined;
        throw err;
      });
      return loading;
    },
    async release() {
      const current = loading;
      loading = undefined;
      const value = await current?.catch(() => undefined);
      if (value !== undefined) await dispose(value);
    },
  };
}
