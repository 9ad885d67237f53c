import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SafeFetcher } from '../../../core/platform/net/safe-fetch.ts';
import { json, testApi, waitFor } from '../../../test/helpers.ts';
import { mp4, pdf, png } from './test-media.ts';

/**
 * The origin serving remote files is on loopback, which the fetcher refuses: the app's fetcher is
 * replaced by one that exempts exactly 127.0.0.1:<origin port> (the test-only allowlist), so every
 * other hop (127.0.0.2, ::1, 10.x, another port) is still refused, before any connection.
 */
const t = await testApi();
let server: http.Server;
let port = 0;
let file: Buffer;
const stalled = new Set<http.ServerResponse>();
/** Opens the gate of /gated.png: the rest of its bytes are sent once it resolves. */
let openGate: () => void = () => {};

beforeAll(async () => {
  file = await png(12, 12);
  server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    switch (u.pathname) {
      case '/portrait.png':
        res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(file.length) });
        return void res.end(file);
      case '/clip.mp4':
        return void res.end(mp4());
      case '/doc.pdf':
        return void res.end(pdf());
      case '/redirect':
        res.writeHead(302, { location: u.searchParams.get('to') ?? '/portrait.png' });
        return void res.end();
      case '/huge.png': {
        // A PNG head then more bytes than the image cap, with no Content-Length.
        res.writeHead(200, { 'content-type': 'image/png' });
        let sent = 0;
        const chunk = Buffer.alloc(256 * 1024);
        const pump = () => {
          if (sent === 0) {
            sent += file.length;
            res.write(file);
          }
          while (!res.destroyed && sent < 25 * 1024 * 1024) {
            sent += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          res.end();
        };
        return pump();
      }
      case '/gated.png': {
        res.writeHead(200, { 'content-type': 'image/png' });
        res.write(file.subarray(0, 16));
        const gate = new Promise<void>((r) => (openGate = r));
        return void gate.then(() => res.end(file.subarray(16)));
      }
      case '/slow':
        return void stalled.add(res);
      case '/error':
        res.writeHead(Number(u.searchParams.get('code') ?? 500));
        return void res.end();
      default:
        res.writeHead(404);
        res.end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
  t.services.safeFetch = new SafeFetcher({
    allowAddresses: [`127.0.0.1:${port}`, '127.0.0.1:1'],
    headersTimeoutMs: 500,
  });
});

afterAll(async () => {
  for (const r of stalled) r.destroy();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await t.services.safeFetch.close();
  await t.close();
});

const ROUTE = '/api/v1/assets/remote';
const origin = () => `http://127.0.0.1:${port}`;

async function create(key: string, body: unknown) {
  const res = await t.request('POST', ROUTE, { key, body });
  return { res, body: await json<Record<string, unknown>>(res) };
}

async function rows(tenantId: string) {
  return t.services.sql<{ id: string; status: string; error: string | null; storage_key: string | null }[]>`
    select id, status, error, storage_key from assets where tenant_id = ${tenantId} order by created_at`;
}

describe('POST /assets/remote', () => {
  it('happy: streams the remote file into storage (through a redirect) and answers 201 with the ready asset', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const { res, body } = await create(apiKey, {
      kind: 'image',
      remoteUrl: `${origin()}/redirect?to=/portrait.png`,
      originalFilename: 'me.png',
      metadata: { source: 'crm', tags: ['a'] },
    });
    expect(res.status).toBe(201);
    expect(body).toMatchObject({
      tenantId,
      kind: 'image',
      status: 'ready',
      contentType: 'image/png',
      sizeBytes: file.length,
      sha256: createHash('sha256').update(file).digest('hex'),
      originalFilename: 'me.png',
      metadata: { source: 'crm', tags: ['a'] },
      error: null,
    });
    expect(body).not.toHaveProperty('sourceUrl');
    const u = new URL(body.publicUrl as string);
    const media = await t.request('GET', u.pathname + u.search);
    expect(Buffer.from(await media.arrayBuffer()).equals(file)).toBe(true);
  });

  it('security: a refused address (redirect to 127.0.0.2, ::1, 10.0.0.1, metadata, another port, localhost) is 422 naming remoteUrl; the row is failed', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const targets = [
      'http://127.0.0.2/x.png',
      'http://[::1]/x.png',
      'http://10.0.0.1/x.png',
      'http://169.254.169.254/latest/meta-data/',
      `http://127.0.0.1:${port + 1}/x.png`,
      `http://localhost:${port + 2}/portrait.png`,
    ];
    for (const to of targets) {
      const { res, body } = await create(apiKey, {
        kind: 'image',
        remoteUrl: `${origin()}/redirect?to=${encodeURIComponent(to)}`,
      });
      expect(res.status, to).toBe(422);
      expect(body).toMatchObject({ code: 'remote_url_refused', field: 'remoteUrl' });
      expect(body.assetId).toMatch(/^ast_/);
    }
    const direct = await create(apiKey, { kind: 'image', remoteUrl: 'http://192.168.1.1/x.png' });
    expect(direct.res.status).toBe(422);
    expect(direct.body).toMatchObject({ code: 'remote_url_refused', field: 'remoteUrl' });
    const all = await rows(tenantId);
    expect(all.length).toBe(targets.length + 1);
    for (const r of all) expect(r).toMatchObject({ status: 'failed', error: 'remote_url_refused', storage_key: null });
  });

  it('error: URLs refused by their form (scheme, credentials, not a URL) are 422 naming remoteUrl, with no row', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    for (const remoteUrl of [
      'ftp://example.com/a.png',
      'file:///etc/passwd',
      `http://u:p@127.0.0.1:${port}/portrait.png`,
      'not a url',
      'javascript:alert(1)',
    ]) {
      const { res, body } = await create(apiKey, { kind: 'image', remoteUrl });
      expect(res.status, remoteUrl).toBe(422);
      expect(body).toMatchObject({ code: 'validation_error', field: 'remoteUrl' });
    }
    expect(await rows(tenantId)).toEqual([]);
  });

  it('error: unreachable origins are 502, a silent one 504, an upstream 404 is 422; rows failed', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const cases: [string, number, string][] = [
      ['http://127.0.0.1:1/x.png', 502, 'upstream_unreachable'],
      [`${origin()}/error?code=503`, 502, 'upstream_unreachable'],
      [`${origin()}/slow`, 504, 'upstream_timeout'],
      [`${origin()}/error?code=404`, 422, 'validation_error'],
    ];
    for (const [remoteUrl, status, code] of cases) {
      const { res, body } = await create(apiKey, { kind: 'image', remoteUrl });
      expect(res.status, remoteUrl).toBe(status);
      expect(body).toMatchObject({ code, field: 'remoteUrl' });
    }
    expect((await rows(tenantId)).map((r) => r.status)).toEqual(['failed', 'failed', 'failed', 'failed']);
  });

  it('error: a kind that disagrees with the bytes is 422 naming kind; unsupported bytes 422; oversize 413 while streaming; nothing stored', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const mismatch = await create(apiKey, { kind: 'image', remoteUrl: `${origin()}/clip.mp4` });
    expect(mismatch.res.status).toBe(422);
    expect(mismatch.body).toMatchObject({ code: 'validation_error', field: 'kind' });
    const unsupported = await create(apiKey, { kind: 'image', remoteUrl: `${origin()}/doc.pdf` });
    expect(unsupported.res.status).toBe(422);
    expect(unsupported.body).toMatchObject({ code: 'unsupported_asset_type', field: 'remoteUrl' });
    const huge = await create(apiKey, { kind: 'image', remoteUrl: `${origin()}/huge.png` });
    expect(huge.res.status).toBe(413);
    expect(huge.body).toMatchObject({ code: 'payload_too_large', field: 'remoteUrl' });
    const all = await rows(tenantId);
    expect(all.map((r) => r.error)).toEqual(['kind_mismatch', 'unsupported_type', 'remote_too_large']);
    for (const r of all) {
      expect(r.status).toBe('failed');
      expect(await t.services.storage.stat(`tenants/${tenantId}/assets/${r.id}`)).toBeUndefined();
    }
  });

  it('error: an asset deleted while its bytes stream in stays deleted: the import answers 404 naming it, and no bytes stay stored', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const importing = create(apiKey, { kind: 'image', remoteUrl: `${origin()}/gated.png` });
    const row = await waitFor('the pending row', async () => (await rows(tenantId))[0]);
    expect(row.status).toBe('pending_upload');
    expect((await t.request('DELETE', `${ROUTE.replace('/remote', '')}/${row.id}`, { key: apiKey })).status).toBe(204);
    openGate();
    const { res, body } = await importing;
    expect(res.status).toBe(404);
    expect(body).toMatchObject({ code: 'not_found', assetId: row.id });
    expect(await t.services.storage.stat(`tenants/${tenantId}/assets/${row.id}`)).toBeUndefined();
    expect((await t.request('GET', `${ROUTE.replace('/remote', '')}/${row.id}`, { key: apiKey })).status).toBe(404);
  });

  it('error: strict body: unknown, mis-cased, missing and invalid fields are 422 naming them', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const ok = { kind: 'image', remoteUrl: `${origin()}/portrait.png` };
    const cases: [unknown, string][] = [
      [{ ...ok, RemoteUrl: 'x' }, 'RemoteUrl'],
      [{ kind: 'image' }, 'remoteUrl'],
      [{ remoteUrl: ok.remoteUrl }, 'kind'],
      [{ ...ok, kind: 'document' }, 'kind'],
      [{ ...ok, metadata: 'x' }, 'metadata'],
      [{ ...ok, metadata: { 'a\u0000': 1 } }, 'metadata'],
      [{ ...ok, metadata: { a: '\ud800' } }, 'metadata'],
      [{ ...ok, originalFilename: '' }, 'originalFilename'],
    ];
    for (const [payload, field] of cases) {
      const { res, body } = await create(apiKey, payload);
      expect(res.status, JSON.stringify(payload)).toBe(422);
      expect(body.field, JSON.stringify(payload)).toBe(field);
    }
    expect(await rows(tenantId)).toEqual([]);
  });
});
