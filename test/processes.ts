import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

/** One line a process wrote: its pino record when it is JSON, else the raw text. */
interface OutputLine {
  stream: 'stdout' | 'stderr';
  text: string;
  record?: { level: number; msg?: string; [field: string]: unknown };
}

export interface EntryPoint {
  child: ChildProcess;
  /** Every line written so far, in order. */
  lines: OutputLine[];
  /** Resolves with the first log record whose `msg` is `msg` (already written or to come); rejects if the process exits first. */
  logged(msg: string): Promise<OutputLine>;
  /** Resolves once the process has exited and its output is read, with its exit code (null when a signal ended it) and signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything written, for failure messages. */
  output(): string;
}

/**
 * Runs one of the project's entry points (e.g. `api/main.ts`) as production does, in its own
 * Node process through tsx, collecting what it writes. `detached` puts it in a new process group, so
 * that a signal sent to the group reaches the process and every child it started, as a terminal's
 * Ctrl-C does.
 */
export function startEntryPoint(
  file: string,
  env: Record<string, string>,
  opts: { args?: string[]; detached?: boolean } = {},
): EntryPoint {
  const child = spawn(process.execPath, ['--import', TSX, path.join(ROOT, file), ...(opts.args ?? [])], {
    cwd: ROOT,
    env: { ...process.env, NODE_OPTIONS: '', NODE_ENV: 'production', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: opts.detached ?? false,
  });
  const lines: OutputLine[] = [];
  const waiters = new Set<{ msg: string; resolve: (l: OutputLine) => void }>();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  for (const stream of ['stdout', 'stderr'] as const) {
    createInterface({ input: child[stream]! }).on('line', (text) => {
      const line: OutputLine = { stream, text };
      try {
        const parsed = JSON.parse(text) as unknown;
        if (parsed && typeof parsed === 'object' && typeof (parsed as { level?: unknown }).level === 'number')
          line.record = parsed as OutputLine['record'];
      } catch {
        // Not JSON: kept as text.
      }
      lines.push(line);
      for (const w of waiters) {
        if (line.record?.msg === w.msg) {
          waiters.delete(w);
          w.resolve(line);
        }
      }
    });
  }
  const output = () => lines.map((l) => `[${l.stream}] ${l.text}`).join('\n');
  return {
    child,
    lines,
    exited,
    output,
    logged: (msg) => {
      const seen = lines.find((l) => l.record?.msg === msg);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const waiter = { msg, resolve };
        waiters.add(waiter);
        void exited.then(({ code, signal }) => {
          if (waiters.delete(waiter))
            reject(new Error(`${file} exited (code ${code}, signal ${signal}) before logging "${msg}":\n${output()}`));
        });
      });
    },
  };
}

/**
 * Stops the embedded PostgreSQL of `dataDir` if a test's process left it running (the server runs
 * detached, so a killed process leaves it behind): a fast shutdown of its postmaster, whose pid is
 * the first line of its pid file.
 */
export function stopLeftoverCluster(dataDir: string): void {
  const pidFile = path.join(dataDir, 'postgres', 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  try {
    process.kill(Number(readFileSync(pidFile, 'utf8').split('\n')[0]), 'SIGINT');
  } catch {
    // Already gone.
  }
}
