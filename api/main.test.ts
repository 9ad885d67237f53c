import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { KeyStore } from '../core/auth/key-store.ts';
import { connect } from '../core/platform/db/client.ts';
import type { EmbeddedRecord } from '../core/platform/db/embedded.ts';
import { TenantStore } from '../core/tenants.ts';
import { freePort } from '../test/deps.ts';
import { startEntryPoint, stopLeftoverCluster, type EntryPoint } from '../test/processes.ts';

/**
 * Stopping the real processes (`npm start` = api/main.ts, and core/wiring/job-worker-main.ts), each on
 * its own embedded PostgreSQL in a fresh DATA_DIR, as an operator does: a stop signal ends them in
 * order (HTTP, then jobs, then listeners and pools, then the database) with exit code 0 and not one
 * error-level log line.
 */
const dataDirs: string[] = [];
afterAll(() => {
  for (const d of dataDirs) rmSync(d, { recursive: true, force: true });
});

function dataDir(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'avatar-stop-'));
  dataDirs.push(d);
  return d;
}

/** The process's error-level (pino 50+) records, and anything on stderr that is not a pino record. */
function errorsOf(p: EntryPoint): string[] {
  return p.lines.filter((l) => (l.record ? l.record.level >= 50 : l.stream === 'stderr')).map((l) => l.text);
}

/** The embedded cluster of `dir` is down: its postmaster removed its pid file on the way out. */
function clusterStopped(dir: string): boolean {
  return !existsSync(path.join(dir, 'postgres', 'postmaster.pid'));
}

async function startServer(dir: string, opts: { detached?: boolean; env?: Record<string, string> } = {}) {
  const port = await freePort();
  const server = startEntryPoint(
    'api/main.ts',
    {
      DATA_DIR: dir,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATABASE_URL: '',
      REDIS_URL: '',
      LOG_LEVEL: 'info',
      ...opts.env,
    },
    opts,
  );
  await server.logged('api listening');
  return { server, base: `http://127.0.0.1:${port}` };
}

/** A tenant and a key, written straight into the server's embedded database. */
async function apiKeyFor(dir: string): Promise<string> {
  const record = JSON.parse(readFileSync(path.join(dir, 'postgres.json'), 'utf8')) as EmbeddedRecord;
  const sql = connect(
    `postgres://${record.user}:${encodeURIComponent(record.password)}@127.0.0.1:${record.port}/${record.database}`,
    1,
  );
  try {
    const tenant = await new TenantStore(sql).create('stop test');
    return (await new KeyStore(sql).create({ tenantId: tenant.id, name: 'stop', scopes: ['*'] })).apiKey;
  } finally {
    await sql.end();
  }
}

interface RawAnswer {
  status: number;
  headers: Map<string, string>;
  body: string;
}

/**
 * Sends a request's head with `Expect: 100-continue` over a new connection and resolves once the
 * server has answered 100 Continue, that is, once it holds the request; `finish` then sends the body
 * and reads the answer to the end of the connection (the server closes it).
 */
async function openRequest(
  base: string,
  method: string,
  target: string,
  headers: Record<string, string>,
  body: string,
) {
  const url = new URL(base);
  const socket = net.connect(Number(url.port), url.hostname);
  let received = Buffer.alloc(0);
  const closed = new Promise<void>((resolve, reject) => {
    socket.on('close', () => resolve());
    socket.on('error', reject);
  });
  const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
  await new Promise<void>((resolve, reject) => {
    socket.on('data', (d: Buffer) => {
      received = Buffer.concat([received, d]);
      if (received.length >= CONTINUE.length) {
        if (received.toString('latin1').startsWith(CONTINUE)) resolve();
        else reject(new Error(`expected 100 Continue, got ${received.toString('latin1')}`));
      }
    });
    const head = [
      `${method} ${target} HTTP/1.1`,
      `Host: ${url.host}`,
      'Expect: 100-continue',
      `Content-Length: ${Buffer.byteLength(body)}`,
    ];
    for (const [k, v] of Object.entries(headers)) head.push(`${k}: ${v}`);
    socket.write(`${head.join('\r\n')}\r\n\r\n`);
  });
  return {
    finish: async (): Promise<RawAnswer> => {
      socket.write(body);
      await closed;
      const text = received.subarray(CONTINUE.length).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const [statusLine, ...headerLines] = text.slice(0, split).split('\r\n');
      const map = new Map(
        headerLines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      return { status: Number(statusLine!.split(' ')[1]), headers: map, body: text.slice(split + 4) };
    },
  };
}

describe('the API server stops cleanly', { timeout: 300_000 }, () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`on ${signal}: serves what is in flight, closes keep-alive connections, exits 0 with no error logged, and stops its database`, async () => {
      const dir = dataDir();
      const { server, base } = await startServer(dir);
      // One keep-alive connection, left open and idle between requests, as a client's pool does.
      const agent = new Agent({ connections: 1 });
      try {
        const key = await apiKeyFor(dir);
        expect((await request(`${base}/healthz`, { dispatcher: agent })).statusCode).toBe(200);
        const auth = { authorization: `Bearer ${key}` };
        for (let i = 0; i < 3; i++) {
          const res = await request(`${base}/api/v1/credits/balance`, { dispatcher: agent, headers: auth });
          expect(res.statusCode).toBe(200);
          await res.body.dump();
        }

        // A request in flight when the signal comes: the server has taken it (its 100 Continue is
        // the proof) and waits for the body, which comes only once the shutdown has begun.
        const inFlight = await openRequest(
          base,
          'POST',
          '/api/v1/api-keys',
          { ...auth, 'content-type': 'application/json' },
          JSON.stringify({ name: 'made while stopping', scopes: ['credits:read'] }),
        );
        server.child.kill(signal);
        await server.logged('shutting down');
        const answered = await inFlight.finish();
        expect(answered.status, answered.body).toBe(201);
        expect(answered.headers.get('connection')).toBe('close');
        expect((JSON.parse(answered.body) as { name: string }).name).toBe('made while stopping');

        const { code } = await server.exited;
        expect(code, server.output()).toBe(0);
        expect(errorsOf(server), server.output()).toEqual([]);
        expect(clusterStopped(dir), 'the embedded PostgreSQL is stopped').toBe(true);
      } finally {
        await agent.close();
        server.child.kill('SIGKILL');
        stopLeftoverCluster(dir);
      }
    });
  }

  it('serves Prometheus metrics on METRICS_PORT and not on PORT, and closes that listener as it stops', async () => {
    const dir = dataDir();
    const metricsPort = await freePort();
    const { server, base } = await startServer(dir, { env: { METRICS_PORT: String(metricsPort) } });
    try {
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toMatch(
        /^http_request_duration_seconds_count\{method="GET",route="\/healthz",status="200"\} 1$/m,
      );
      const onPublicPort = await fetch(`${base}/metrics`);
      expect(onPublicPort.status).toBe(404);
      expect(await onPublicPort.json()).toMatchObject({ code: 'not_found' });
      server.child.kill('SIGTERM');
      const { code } = await server.exited;
      expect(code, server.output()).toBe(0);
      expect(errorsOf(server), server.output()).toEqual([]);
      await expect(fetch(`http://127.0.0.1:${metricsPort}/metrics`)).rejects.toThrow();
    } finally {
      server.child.kill('SIGKILL');
      stopLeftoverCluster(dir);
    }
  });

  it('on Ctrl-C in a terminal (SIGINT to the whole process group): exits 0 with no error logged, and stops its database', async () => {
    const dir = dataDir();
    const { server, base } = await startServer(dir, { detached: true });
    try {
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      process.kill(-server.child.pid!, 'SIGINT');
      const { code } = await server.exited;
      expect(code, server.output()).toBe(0);
      expect(errorsOf(server), server.output()).toEqual([]);
      expect(clusterStopped(dir), 'the embedded PostgreSQL is stopped').toBe(true);
    } finally {
      server.child.kill('SIGKILL');
      stopLeftoverCluster(dir);
    }
  });
});

describe('the job worker stops cleanly', { timeout: 300_000 }, () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`on ${signal}: exits 0 with no error logged, and stops its database`, async () => {
      const dir = dataDir();
      const worker = startEntryPoint('core/wiring/job-worker-main.ts', {
        DATA_DIR: dir,
        DATABASE_URL: '',
        REDIS_URL: '',
        LOG_LEVEL: 'info',
      });
      try {
        await worker.logged('job worker started');
        worker.child.kill(signal);
        const { code } = await worker.exited;
        expect(code, worker.output()).toBe(0);
        expect(errorsOf(worker), worker.output()).toEqual([]);
        expect(clusterStopped(dir), 'the embedded PostgreSQL is stopped').toBe(true);
      } finally {
        worker.child.kill('SIGKILL');
        stopLeftoverCluster(dir);
      }
    });
  }
});
