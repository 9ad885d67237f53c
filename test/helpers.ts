import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, expect, inject } from 'vitest';
import { createApp } from '../api/app.ts';
import type { Scope } from '../core/auth/keys.ts';
import { ApiError, type ErrorCode } from '../core/platform/errors.ts';
import { loadConfig } from '../core/platform/config.ts';
import { MICROS_PER_SECOND } from '../core/credits/ledger.ts';
import { newId } from '../core/platform/ids.ts';
import { connect, type Sql } from '../core/platform/db/client.ts';
import { createLogger, type Logger } from '../core/platform/log.ts';
import { connectRedis, createServices, type Services } from '../core/wiring/services.ts';
import { contractChecker, type ContractChecker } from './contract.ts';
import { TEMPLATE_DB } from './global-setup.ts';

let seq = 0;

/** A new database cloned from the migrated template: each test file gets its own. */
export async function freshDatabase(): Promise<{ url: string; sql: Sql; drop(): Promise<void> }> {
  const adminUrl = inject('pgAdminUrl');
  const name = `t_${process.pid}_${Date.now().toString(36)}_${seq++}`;
  const admin = connect(adminUrl, 1);
  await admin.unsafe(`create database ${name} template ${TEMPLATE_DB}`);
  await admin.end();
  const url = adminUrl.replace(/\/postgres$/, `/${name}`);
  const sql = connect(url, 10);
  return {
    url,
    sql,
    drop: async () => {
      await sql.end({ timeout: 2 });
      const a = connect(adminUrl, 1);
      await a.unsafe(`drop database if exists ${name} with (force)`);
      await a.end();
    },
  };
}

export interface TestServicesOptions {
  /** Use the real Redis of the test run (default: in-process coordination). */
  redis?: boolean;
  env?: Record<string, string>;
  log?: Logger;
  /** Share a database with another instance (two API processes on one database). */
  database?: { url: string; sql: Sql };
}

export async function testServices(opts: TestServicesOptions = {}): Promise<Services & { dbUrl: string }> {
  const owned = opts.database ? undefined : await freshDatabase();
  const db = opts.database ?? owned!;
  const config = loadConfig({
    DATABASE_URL: db.url,
    DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'avatar-test-data-')),
    LOG_LEVEL: 'silent',
    NODE_ENV: 'test',
    ...(opts.redis ? { REDIS_URL: inject('redisUrl') } : {}),
    ...opts.env,
  });
  const services = await createServices(config, {
    log: opts.log ?? createLogger('silent'),
    database: { sql: db.sql, url: db.url, close: async () => {} },
    listen: true,
  });
  return {
    ...services,
    dbUrl: db.url,
    close: async () => {
      await services.close();
      await owned?.drop();
    },
  };
}

export interface RequestOptions {
  key?: string;
  body?: unknown;
  /** Sent as-is (no JSON encoding) when a string. */
  rawBody?: string | Uint8Array | ReadableStream;
  headers?: Record<string, string>;
}

export type TestApi = Awaited<ReturnType<typeof testApi>>;

/** An API app on its own database, plus helpers to create tenants and call it. */
export async function testApi(opts: TestServicesOptions = {}) {
  const services = await testServices(opts);
  const app = createApp(services);
  /** Every exchange through `request` is checked against the app's OpenAPI document (test/contract.ts). */
  let contract: Promise<ContractChecker> | undefined;

  async function request(method: string, url: string, o: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { ...o.headers };
    if (o.key) headers.authorization = `Bearer ${o.key}`;
    let body: RequestInit['body'];
    if (o.rawBody !== undefined) body = o.rawBody as RequestInit['body'];
    else if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const init: RequestInit & { duplex?: 'half' } = { method, headers, body };
    if (body instanceof ReadableStream) init.duplex = 'half';
    const response = await app.request(url, init);
    const requestText =
      typeof body === 'string'
        ? body
        : body instanceof Uint8Array && /json/i.test(headers['content-type'] ?? '')
          ? new TextDecoder().decode(body)
          : undefined;
    await (
      await checker()
    ).check({ method, url, requestHeaders: headers, requestText, hadBody: body !== undefined, response });
    return response;
  }

  async function newTenant(o: { credits?: number; scopes?: Scope[]; spendLimitCreditMicros?: number } = {}) {
    const tenant = await services.tenants.create(`tenant ${seq++}`);
    if (o.credits) await services.ledger.grant(tenant.id, o.credits * MICROS_PER_SECOND);
    const { apiKey, record } = await services.keys.create({
      tenantId: tenant.id,
      name: 'test',
      scopes: o.scopes ?? ['*'],
      spendLimitCreditMicros: o.spendLimitCreditMicros ?? null,
    });
    return { tenantId: tenant.id, apiKey, apiKeyId: record.id };
  }

  /** An asset as an upload leaves it: its bytes in storage and its row (`ready` unless said); its id. */
  async function storeAsset(
    tenantId: string,
    bytes: Buffer,
    o: { kind: 'image' | 'video' | 'audio'; contentType: string; status?: 'ready' | 'pending_upload' | 'failed' },
  ): Promise<string> {
    const id = newId('asset');
    const key = `tenants/${tenantId}/assets/${id}/original.${o.contentType.split('/')[1]!.replace('jpeg', 'jpg')}`;
    const put = await services.storage.put(key, bytes, { contentType: o.contentType });
    await services.sql`
      insert into assets (id, tenant_id, kind, status, content_type, size_bytes, sha256, storage_key)
      values (${id}, ${tenantId}, ${o.kind}, ${o.status ?? 'ready'}, ${o.contentType}, ${put.size}, ${put.sha256}, ${key})`;
    return id;
  }

  /** The contract checker of `request` (its `checked` lists the exchanges checked so far). */
  const checker = () => (contract ??= contractChecker(app));

  return { services, app, request, newTenant, storeAsset, contract: checker, close: () => services.close() };
}

/** Reads a JSON body, failing the test with the raw text when it is not JSON. */
export async function json<T = Record<string, unknown>>(res: Response): Promise<T> {
  const text = await res.text();
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new Error(`Expected JSON, got ${res.status}: ${text.slice(0, 300)}`);
  }
}

/** Awaits a promise that must reject with an ApiError of this code and status; returns the error. */
export async function expectApiError(p: Promise<unknown>, code: ErrorCode, status: number): Promise<ApiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `expected ApiError ${code}`).toBeInstanceOf(ApiError);
  const e = err as ApiError;
  expect(e.code).toBe(code);
  expect(e.status).toBe(status);
  return e;
}

export interface WaitForOptions {
  /** Gives up after this long; generous on purpose (a loaded machine is slow, not broken): the test's own timeout should be the tighter bound. */
  timeoutMs?: number;
  /** Pause between probes. */
  intervalMs?: number;
}

/**
 * Polls `probe` until it returns something other than `undefined`, and returns that: the one way
 * tests wait for state that changes in the background (a job, a row, a server). Tests wait on the
 * state itself, never on a fixed sleep. `what` names the awaited state in the timeout error (a
 * function is called then, so it can describe the last value seen).
 */
export async function waitFor<T>(
  what: string | (() => string),
  probe: () => Promise<T | undefined> | T | undefined,
  opts: WaitForOptions = {},
): Promise<T> {
  const { timeoutMs = 120_000, intervalMs = 200 } = opts;
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end)
      throw new Error(
        `Timed out after ${timeoutMs / 1000} s waiting for ${typeof what === 'function' ? what() : what}`,
      );
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Opens connections to the suite's Redis, each closed after the test file. Call at the top of a file. */
export function redisConnections(): () => Redis {
  const connections: Redis[] = [];
  afterAll(() => {
    for (const r of connections) r.disconnect();
  });
  return () => {
    const r = connectRedis(inject('redisUrl'));
    connections.push(r);
    return r;
  };
}

/** `url` with the first character of its `sig` parameter changed (always to a different one): a tampered signed URL. */
export function withTamperedSignature(url: string): string {
  const u = new URL(url, 'http://relative.invalid');
  const sig = u.searchParams.get('sig') ?? '';
  u.searchParams.set('sig', `${sig.startsWith('A') ? 'B' : 'A'}${sig.slice(1)}`);
  return url.startsWith('/') ? `${u.pathname}${u.search}` : u.toString();
}
