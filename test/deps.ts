import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, closeSync, existsSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../core/platform/net/free-port.ts';

export { freePort };

/**
 * The real servers the tests and benchmarks run against: redis-server (Debian package) and the
 * LiveKit server (built by scripts/install-test-deps.sh into a cache keyed by version).
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function livekitVersion(): string {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
    config: { livekitServerVersion: string };
  };
  return pkg.config.livekitServerVersion;
}

/** Where scripts/install-test-deps.sh puts the LiveKit server binary (outside the clone, keyed by version). */
function livekitBinary(): string {
  if (process.env.LIVEKIT_SERVER_BIN) return process.env.LIVEKIT_SERVER_BIN;
  const cache = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache');
  return path.join(cache, 'avatar-platform', 'livekit-server', livekitVersion(), 'server');
}

async function waitForPort(port: number, child: ChildProcess, name: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.end();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${name} did not listen on ${port} within ${timeoutMs} ms`);
}

export interface RunningServer {
  url: string;
  stop(): Promise<void>;
  /** The server's process (benchmarks read its CPU). */
  pid?: number;
}

function stopper(child: ChildProcess): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 5000).unref();
    });
}

export async function startRedis(): Promise<RunningServer> {
  const bin = process.env.REDIS_SERVER_BIN ?? 'redis-server';
  const port = await freePort();
  const child = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  child.on('error', () => {});
  await waitForPort(port, child, 'redis-server').catch((err: unknown) => {
    throw new Error(`Cannot start redis-server (${String(err)}). Install it: bash scripts/install-test-deps.sh`);
  });
  return { url: `redis://127.0.0.1:${port}`, stop: stopper(child) };
}

export const LIVEKIT_DEV_KEY = 'devkey';
export const LIVEKIT_DEV_SECRET = 'secret';

export interface LiveKitOptions {
  /** Where the server posts its webhooks, signed with the dev key (the test run's relay, test/webhook-relay.ts). */
  webhookUrls?: string[];
  /** The port clients connect to; default a free one. A fixed port lets a test restart the server at the same URL. */
  port?: number;
}

export async function startLiveKit(opts: LiveKitOptions = {}): Promise<RunningServer> {
  const bin = livekitBinary();
  if (!existsSync(bin)) {
    throw new Error(`LiveKit server not found at ${bin}. Build it: bash scripts/install-test-deps.sh`);
  }
  const [port, tcp, udp] = [opts.port ?? (await freePort()), await freePort(), await freePort()];
  const lines = [`port: ${port}`, 'rtc:', `  tcp_port: ${tcp}`, `  udp_port: ${udp}`, '  use_external_ip: false'];
  if (opts.webhookUrls?.length)
    lines.push('webhook:', `  api_key: ${LIVEKIT_DEV_KEY}`, '  urls:', ...opts.webhookUrls.map((u) => `    - ${u}`));
  const config = lines.join('\n');
  const child = spawn(bin, ['--dev', '--bind', '127.0.0.1', '--node-ip', '127.0.0.1', '--config-body', config], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  // LIVEKIT_LOG=<file>: the server's whole log, appended (to see what it made of a failing test's requests).
  const logFile = process.env.LIVEKIT_LOG;
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
    if (logFile) appendFileSync(logFile, d);
  });
  await waitForPort(port, child, 'livekit-server').catch((err: unknown) => {
    throw new Error(`${String(err)}\n${stderr}`);
  });
  return { url: `ws://127.0.0.1:${port}`, stop: stopper(child), ...(child.pid ? { pid: child.pid } : {}) };
}

/**
 * How much of the end of LIVEKIT_LOG a failure message reads: a whole CI run's log is tens of MB (a
 * minute of calls about 6), and some tests build their message during live calls, before they know
 * whether it is needed.
 */
const LIVEKIT_LOG_TAIL_BYTES = 32 * 2 ** 20;

function readTail(file: string, bytes: number): string {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const buf = Buffer.alloc(Math.min(size, bytes));
    readSync(fd, buf, 0, buf.length, size - buf.length);
    return buf.toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** The LiveKit server's debug lines a failure message quotes: how a room's tracks and connections went. */
const LIVEKIT_STEPS =
  /^(add track request|pending track (added|queued)|track (published|unpublished|subscribed)|subscribing to track|received offer|sending answer|(peer|ice) connection state change|starting signal connection|signal stream closed)$/;

/**
 * For a failure message: what the LiveKit servers logged about `room` (LIVEKIT_LOG, when set): its
 * warnings, notes (webhooks left out) and the steps of its tracks and connections, each line cut
 * short: the first `headLines` (when the room was created, its agents dispatched, who joined when)
 * and the last `maxLines`.
 */
export function livekitLogFor(room: string, maxLines = 80, headLines = 20): string {
  const file = process.env.LIVEKIT_LOG;
  if (!file || !existsSync(file)) return '';
  const lines = readTail(file, LIVEKIT_LOG_TAIL_BYTES)
    .split('\n')
    .filter((l) => {
      if (!l.includes(`"room": "${room}"`)) return false;
      const [, level, , , msg = ''] = l.split('\t');
      return level === 'DEBUG' ? LIVEKIT_STEPS.test(msg) : msg !== 'sent webhook';
    })
    .map((l) => l.slice(0, 300));
  if (lines.length <= headLines + maxLines) return lines.join('\n');
  return [
    ...lines.slice(0, headLines),
    `... ${lines.length - headLines - maxLines} lines ...`,
    ...lines.slice(-maxLines),
  ].join('\n');
}

/** moto's S3-compatible server (PyPI `moto[server]`), installed by scripts/install-test-deps.sh into a venv in the cache. */
function motoServerBinary(): string {
  if (process.env.MOTO_SERVER_BIN) return process.env.MOTO_SERVER_BIN;
  const cache = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache');
  const version = (
    JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { config: { motoVersion: string } }
  ).config.motoVersion;
  const venv = path.join(cache, 'avatar-platform', `moto-${version}`, 'bin', 'moto_server');
  return existsSync(venv) ? venv : 'moto_server';
}

/** A real S3-compatible endpoint on loopback for the storage contract suite. */
export async function startS3Server(): Promise<RunningServer> {
  const port = await freePort();
  const child = spawn(motoServerBinary(), ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  child.on('error', () => {});
  await waitForPort(port, child, 'moto_server').catch((err: unknown) => {
    throw new Error(`Cannot start moto_server (${String(err)}). Install it: bash scripts/install-test-deps.sh`);
  });
  return { url: `http://127.0.0.1:${port}`, stop: stopper(child) };
}
