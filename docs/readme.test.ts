import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../test/deps.ts';

/**
 * The README's "First calls" run as written: its fenced block, run by bash with `set -euo
 * pipefail` against a real server (`node --import tsx api/main.ts`, embedded PostgreSQL in a fresh
 * DATA_DIR that the block's admin CLI shares through the environment). Short loops and one
 * default clip (`smile`, which the declaration retires) keep it quick.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The first ```sh block after the "## First calls" heading. */
export function firstCallsBlock(readme: string): string {
  const section = readme.slice(readme.indexOf('\n## First calls\n'));
  const m = /```sh\n([\s\S]*?)\n```/.exec(section);
  if (!section.startsWith('\n## First calls') || !m) throw new Error('README.md has no "## First calls" section with a ```sh block');
  return m[1]!;
}

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'avatar-readme-'));
let server: ChildProcess;
let api: string;
let serverLog = '';

const env = (port: number): NodeJS.ProcessEnv => ({
  ...process.env,
  DATABASE_URL: '',
  REDIS_URL: '',
  DATA_DIR: dataDir,
  PORT: String(port),
  PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
  LOG_LEVEL: 'warn',
  AVATAR_LOOP_SECONDS: '2',
  DEFAULT_MOTION_CLIPS: 'smile',
  JOB_POLL_SECONDS: '1',
});

beforeAll(async () => {
  const port = await freePort();
  api = `http://127.0.0.1:${port}`;
  server = spawn(process.execPath, ['--import', 'tsx', 'api/main.ts'], { cwd: ROOT, env: env(port), stdio: ['ignore', 'pipe', 'pipe'] });
  const keep = (d: Buffer) => (serverLog = (serverLog + d.toString()).slice(-4000));
  server.stdout!.on('data', keep);
  server.stderr!.on('data', keep);
  // Up once /healthz answers (the embedded PostgreSQL is created first); a server that exits fails at once.
  for (const deadline = Date.now() + 60_000; ; ) {
    if (server.exitCode !== null) throw new Error(`the server exited with ${server.exitCode}:\n${serverLog}`);
    if ((await fetch(`${api}/healthz`).catch(() => undefined))?.status === 200) break;
    if (Date.now() > deadline) throw new Error(`the server did not answer /healthz within 60 s:\n${serverLog}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}, 90_000);

afterAll(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server.once('exit', r));
    server.kill('SIGTERM');
    await exited;
  }
  rmSync(dataDir, { recursive: true, force: true });
}, 30_000);

describe('README "First calls"', () => {
  it('runs as written with bash -euo pipefail: the avatar gets ready, its loop plays, the clip library PUT answers 202', async () => {
    const block = firstCallsBlock(readFileSync(path.join(ROOT, 'README.md'), 'utf8'));
    const port = new URL(api).port;
    const run = spawn('bash', ['-euo', 'pipefail', '-c', block], { cwd: ROOT, env: { ...env(Number(port)), API: api }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    run.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    run.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((r) => run.on('close', r));
    const where = `exit ${code}\nstdout:\n${stdout.slice(-3000)}\nstderr:\n${stderr.slice(-3000)}\nserver:\n${serverLog}`;
    expect(code, where).toBe(0);

    const lines = stdout.trim().split('\n');
    // The balance, the new key and the usage page are JSON; the document lists the operations.
    expect(JSON.parse(lines[0]!), where).toMatchObject({ balanceCreditMicros: 3_600_000_000 });
    expect(JSON.parse(lines[1]!), where).toMatchObject({ name: 'backend', spendLimitCreditMicros: 60_000_000, apiKey: expect.stringMatching(/^svc_/) });
    expect(JSON.parse(lines[2]!), where).toMatchObject({ data: [], nextCursor: null });
    expect(lines, where).toContain('/api/v1/avatars/{avatarId}/clips');
    expect(stdout, where).toMatch(/^avatar ava_\w+: ready$/m);
    const duration = /^duration=([\d.]+)$/m.exec(stdout);
    expect(Number(duration?.[1]), where).toBeCloseTo(2, 0);
    // The default clip, listed before the declaration replaces it.
    expect(lines.some((l) => /^smile (queued|rendering|ready)$/.test(l)), where).toBe(true);
    // The PUT's envelope, then its status.
    expect(lines.at(-1), where).toBe('202');
    const answer = JSON.parse(lines.at(-2)!) as { revision: number; plan: { kept: string[]; queued: string[]; retired: string[] }; behavior: unknown };
    expect(answer.revision).toBe(1);
    expect({ ...answer.plan, queued: [...answer.plan.queued].sort() }).toEqual({ kept: [], queued: ['listen', 'look', 'nod'], retired: ['smile'] });
    expect(answer.behavior).toMatchObject({ idle: { clips: ['look'], weights: { source: 3, look: 1 } }, on: { userSpeechStarted: { clips: ['listen'] } } });
  }, 240_000);
});
