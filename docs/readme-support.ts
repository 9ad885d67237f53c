/**
 * Running the README as written: its fenced shell blocks, by bash with `set -euo pipefail`, against
 * a real server (`node --import tsx api/main.ts`, embedded PostgreSQL in a fresh DATA_DIR that the
 * blocks' admin CLI shares through the environment).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/deps.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The `index`-th fenced `lang` block of the section headed `heading` in a markdown file of the repository. */
export function markdownBlock(
  file: string,
  heading: string,
  { index = 0, lang = 'sh' }: { index?: number; lang?: string } = {},
): string {
  const doc = readFileSync(path.join(ROOT, file), 'utf8');
  const at = doc.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`${file} has no "${heading}" section`);
  const next = doc.indexOf('\n## ', at + heading.length + 2);
  const section = doc.slice(at, next < 0 ? undefined : next);
  const blocks = [...section.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)\\n```', 'g'))].map((m) => m[1]!);
  if (!blocks[index]) throw new Error(`${file}'s "${heading}" has no ${lang} block #${index + 1}`);
  return blocks[index];
}

/** The `index`-th ```sh block of the README section headed `heading` (e.g. "## First calls"). */
export function readmeBlock(heading: string, index = 0): string {
  return markdownBlock('README.md', heading, { index });
}

export interface ReadmeServer {
  api: string;
  /** The environment the server runs with, for the blocks and any other process sharing its DATA_DIR. */
  env: NodeJS.ProcessEnv;
  log(): string;
  stop(): Promise<void>;
}

/** The API on a free port with a fresh DATA_DIR; short loops and one default clip keep generation quick. */
export async function startReadmeServer(extraEnv: Record<string, string> = {}): Promise<ReadmeServer> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'avatar-readme-'));
  const port = await freePort();
  const api = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: '',
    REDIS_URL: '',
    DATA_DIR: dataDir,
    PORT: String(port),
    PUBLIC_BASE_URL: api,
    LOG_LEVEL: 'warn',
    AVATAR_LOOP_SECONDS: '2',
    DEFAULT_MOTION_CLIPS: 'smile',
    JOB_POLL_SECONDS: '1',
    ...extraEnv,
  };
  const server: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'api/main.ts'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const keep = (d: Buffer) => (log = (log + d.toString()).slice(-4000));
  server.stdout!.on('data', keep);
  server.stderr!.on('data', keep);
  const stop = async () => {
    if (server.exitCode === null) {
      const exited = new Promise((r) => server.once('exit', r));
      server.kill('SIGTERM');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  // Up once /healthz answers (the embedded PostgreSQL is created first); a server that exits fails at once.
  for (const deadline = Date.now() + 60_000; ;) {
    if (server.exitCode !== null) throw new Error(`the server exited with ${server.exitCode}:\n${log}`);
    if ((await fetch(`${api}/healthz`).catch(() => undefined))?.status === 200) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`the server did not answer /healthz within 60 s:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { api, env, log: () => log, stop };
}

/** Runs a script as the README reader would paste it: bash -euo pipefail at the repository root, API set. */
export async function runBlocks(
  script: string,
  server: ReadmeServer,
): Promise<{ code: number | null; stdout: string; stderr: string; where: string }> {
  // A user's shell: no NODE_ENV (the test runner's is `test`).
  const { NODE_ENV: _testEnv, ...shell } = server.env;
  const run = spawn('bash', ['-euo', 'pipefail', '-c', script], {
    cwd: ROOT,
    env: { ...shell, API: server.api },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  run.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  run.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((r) => run.on('close', r));
  const where = `exit ${code}\nstdout:\n${stdout.slice(-3000)}\nstderr:\n${stderr.slice(-3000)}\nserver:\n${server.log()}`;
  return { code, stdout, stderr, where };
}
