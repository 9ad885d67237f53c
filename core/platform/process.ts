import type { Logger } from './log.ts';

/** The signals that ask a process to stop: Ctrl-C, `kill` and orchestrators, a closed terminal. */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** An entry point's ordered shutdown. */
export type Stop = () => Promise<void>;

export interface ShutdownOptions {
  /** Exit status once the stop has completed, by signal: 0 by default (a requested stop is a clean exit). */
  exitCode?: (signal: NodeJS.Signals) => number;
}

/**
 * Makes the stop signals run `stop`, the process's own ordered shutdown, once, then exit with
 * `exitCode` (0 by default), or 1 when `stop` failed; code that would exit on its own checks
 * `stopping` first. This must be the only handler of these
 * signals: nothing else may stop shared resources (the embedded PostgreSQL, pools) behind its back.
 * Further signals while stopping are ignored: a terminal's Ctrl-C reaches the process both
 * directly and forwarded by npm.
 */
export function onShutdown(log: Logger, stop: Stop, opts: ShutdownOptions = {}): { readonly stopping: boolean } {
  let stopping = false;
  const handle = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    let code = opts.exitCode?.(signal) ?? 0;
    try {
      await stop();
      log.info('stopped');
    } catch (err) {
      log.error({ err }, 'shutdown failed');
      code = 1;
    }
    // pino writes to stdout synchronously: everything logged is out before the exit.
    process.exit(code);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, (s: NodeJS.Signals) => void handle(s));
  return {
    /** True once a stop signal came: the process exits when `stop` is done, and not before. */
    get stopping() {
      return stopping;
    },
  };
}

/**
 * The one way a long-running entry point runs (the API server, the job worker, the agent worker):
 * `start` brings it up and returns its ordered stop, which the stop signals then run (onShutdown).
 * The signals are handled from the first moment: one that arrives during start-up waits for it,
 * then stops what started. A start that fails prints its error and exits 1.
 */
export function runEntryPoint(log: Logger, start: () => Promise<Stop>): void {
  const started = start();
  onShutdown(log, async () => {
    const stop = await started.catch(() => undefined);
    await stop?.();
  });
  started.catch((err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  });
}
