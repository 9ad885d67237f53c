import net from 'node:net';
import { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../core/errors.ts';
import { testApi } from '../test/helpers.ts';
import { DEFAULT_BODY_LIMIT, DRAIN_MAX_BYTES } from './middleware/guard.ts';
import { startApiServer, type ApiServer } from './server.ts';

/** The API over a real HTTP server (api/server.ts, as `npm start` serves it) on a free port. */
const t = await testApi();
let server: ApiServer;
let base = '';
beforeAll(async () => {
  server = await startApiServer(t.app.fetch, { port: 0, hostname: '127.0.0.1' });
  base = `http://127.0.0.1:${server.port}`;
});
afterAll(async () => {
  await server.close({ timeoutMs: 1000 });
  await t.close();
});

describe('an over-cap body on a keep-alive connection', () => {
  it('is answered 413 and the connection stays usable: every request after it is answered correctly', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const auth = { authorization: `Bearer ${apiKey}` };
    // One connection, kept alive and reused for every request, as a client's pool does.
    const agent = new Agent({ connections: 1 });
    const name = (n: number) => JSON.stringify({ name: `key ${n}`, scopes: ['credits:read'] });
    const overCap = (bytes: number) => JSON.stringify({ name: 'x'.repeat(bytes), scopes: ['credits:read'] });
    // Declared lengths just over the cap and far over it, and a chunked body with no length at all.
    const oversized: { label: string; body: string | (() => Readable) }[] = [
      { label: 'just over the cap', body: overCap(DEFAULT_BODY_LIMIT) },
      { label: '1 MiB', body: overCap(1 << 20) },
      {
        label: 'chunked, 256 KiB',
        body: () =>
          Readable.from(
            (function* () {
              yield Buffer.from('{"name":"');
              for (let i = 0; i < 16; i++) yield Buffer.alloc(16 * 1024, 'y');
              yield Buffer.from('"}');
            })(),
          ),
      },
    ];
    // A socket error names the request it hit.
    const send = (label: string, url: string, opts: Omit<Parameters<typeof request>[1] & object, 'dispatcher'>) =>
      request(url, { ...opts, dispatcher: agent }).catch((err: unknown) => {
        throw new Error(`${label}: ${String(err)}`, { cause: err });
      });
    let connections = 0;
    const count = () => connections++;
    server.server.on('connection', count);
    try {
      for (let round = 0; round < 3; round++) {
        for (const [i, big] of oversized.entries()) {
          const tooLarge = await send(big.label, `${base}/api/v1/api-keys`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: typeof big.body === 'string' ? big.body : big.body(),
          });
          expect(tooLarge.statusCode, big.label).toBe(413);
          expect(await tooLarge.body.json(), big.label).toMatchObject({ status: 413, code: 'payload_too_large', maxBytes: DEFAULT_BODY_LIMIT });

          const created = await send(`a request after ${big.label}`, `${base}/api/v1/api-keys`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: name(round * 10 + i),
          });
          expect(created.statusCode, `after ${big.label}`).toBe(201);
          expect(((await created.body.json()) as { name: string }).name).toBe(`key ${round * 10 + i}`);

          const balance = await send(`a second request after ${big.label}`, `${base}/api/v1/credits/balance`, { headers: auth });
          expect(balance.statusCode, `after ${big.label}`).toBe(200);
          await balance.body.dump();
        }
      }
    } finally {
      server.server.off('connection', count);
      await agent.close();
    }
    // The same connection throughout: no 413 cost the client its connection.
    expect(connections).toBe(1);
    // Nothing of the refused bodies was written.
    expect((await t.services.keys.list(tenantId)).map((k) => k.name).sort()).toEqual(['test', ...[0, 1, 2, 10, 11, 12, 20, 21, 22].map((n) => `key ${n}`)].sort());
  });
});

describe('a body declared beyond what is worth draining', () => {
  it('is answered 413 with Connection: close at once, and the connection is closed (never reused)', async () => {
    const { apiKey } = await t.newTenant();
    const socket = net.connect(server.port, '127.0.0.1');
    let received = '';
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    const length = DEFAULT_BODY_LIMIT + DRAIN_MAX_BYTES + 1;
    // Only the head: the server must not wait for the body it will not read.
    socket.write(`POST /api/v1/api-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`);
    await closed;
    const [head, body] = received.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 413 /);
    expect(head).toMatch(/\r\nconnection: close\r\n/i);
    expect(JSON.parse(body!)).toMatchObject({ status: 413, code: 'payload_too_large', maxBytes: DEFAULT_BODY_LIMIT });
  });
});

/** Sends raw bytes on a new connection and reads the answer to the end of the connection. */
async function rawExchange(bytes: string): Promise<{ head: string; headers: Map<string, string>; body: string }> {
  const socket = net.connect(server.port, '127.0.0.1');
  let received = '';
  socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.write(bytes);
  await closed;
  const [head, body] = received.split('\r\n\r\n');
  const headers = new Map(head!.split('\r\n').slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { head: head!, headers, body: body ?? '' };
}

describe("requests Node's parser refuses", () => {
  it('431 for oversized headers and 400 for a malformed request, each with the error body, its request id and Connection: close', async () => {
    const cases = [
      { bytes: `GET /api/v1/credits/balance HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'x'.repeat(20_000)}\r\n\r\n`, error: new ApiError('headers_too_large', 'Request headers too large') },
      { bytes: 'GET /api/v1/credits/balance HTTP/1.1\r\nBad Header: x\r\n\r\n', error: new ApiError('bad_request', 'Malformed HTTP request') },
    ];
    for (const { bytes, error } of cases) {
      const res = await rawExchange(bytes);
      expect(res.head).toMatch(new RegExp(`^HTTP/1\\.1 ${error.status} `));
      const requestId = res.headers.get('x-request-id');
      expect(requestId).toMatch(/^req_/);
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('connection')).toBe('close');
      expect(JSON.parse(res.body)).toEqual(error.toBody(requestId!));
    }
  });
});
