import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import { Readable, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ApiError } from '../core/platform/errors.ts';
import { testApi, waitFor } from '../test/helpers.ts';
import type { HttpLimits } from './http-limits.ts';
import { DEFAULT_BODY_LIMIT, DRAIN_MAX_BYTES } from './middleware/guard.ts';
import { multipart, wav } from './routes/assets/test-media.ts';
import { startApiServer, type ApiServer } from './server.ts';

/** What the app logs, parsed: the tests read the levels and messages. */
let logs: { level: number; msg: string; path?: string; requestId?: string }[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, cb) {
    logs.push(JSON.parse(chunk.toString()) as (typeof logs)[number]);
    cb();
  },
});

/** The API over a real HTTP server (api/server.ts, as `npm start` serves it) on a free port. */
const t = await testApi({ log: pino({ level: 'info' }, sink) });
let server: ApiServer;
let base = '';
/**
 * The same app behind bounds a test can outwait: a head within 600 ms, a whole request within
 * 2.5 s, a body advancing by 100 bytes/s over any 400 ms.
 */
const LIMITS: HttpLimits = {
  headersTimeoutMs: 600,
  requestTimeoutMs: 2500,
  bodyStallMs: 400,
  bodyMinBytesPerSecond: 100,
};
let limited: ApiServer;
beforeAll(async () => {
  server = await startApiServer(t.app.fetch, { port: 0, hostname: '127.0.0.1', log: t.services.log });
  base = `http://127.0.0.1:${server.port}`;
  limited = await startApiServer(t.app.fetch, { port: 0, hostname: '127.0.0.1', limits: LIMITS, log: t.services.log });
});
afterAll(async () => {
  await server.close({ timeoutMs: 1000 });
  await limited.close({ timeoutMs: 1000 });
  await t.close();
});
beforeEach(() => {
  logs = [];
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
          expect(await tooLarge.body.json(), big.label).toMatchObject({
            status: 413,
            code: 'payload_too_large',
            maxBytes: DEFAULT_BODY_LIMIT,
          });

          const created = await send(`a request after ${big.label}`, `${base}/api/v1/api-keys`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: name(round * 10 + i),
          });
          expect(created.statusCode, `after ${big.label}`).toBe(201);
          expect(((await created.body.json()) as { name: string }).name).toBe(`key ${round * 10 + i}`);

          const balance = await send(`a second request after ${big.label}`, `${base}/api/v1/credits/balance`, {
            headers: auth,
          });
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
    expect((await t.services.keys.list(tenantId)).map((k) => k.name).sort()).toEqual(
      ['test', ...[0, 1, 2, 10, 11, 12, 20, 21, 22].map((n) => `key ${n}`)].sort(),
    );
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
    socket.write(
      `POST /api/v1/api-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`,
    );
    await closed;
    const [head, body] = received.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 413 /);
    expect(head).toMatch(/\r\nconnection: close\r\n/i);
    expect(JSON.parse(body!)).toMatchObject({ status: 413, code: 'payload_too_large', maxBytes: DEFAULT_BODY_LIMIT });
  });
});

interface RawAnswer {
  head: string;
  headers: Map<string, string>;
  body: string;
  /** From the first byte sent to the connection's close. */
  ms: number;
}

/**
 * Opens a connection to `port`, lets `talk` write to it (over time, if it likes) and reads the
 * answer to the end of the connection. Fails when the connection is still open after `withinMs`:
 * a server that holds a stalled client is what these tests look for.
 */
async function rawSession(
  port: number,
  talk: (socket: net.Socket, closed: Promise<void>) => unknown,
  withinMs = 20_000,
  o: { allowHalfOpen?: boolean } = {},
): Promise<RawAnswer> {
  const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: o.allowHalfOpen ?? false });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const start = performance.now();
  let received = '';
  socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
  // A reset after the answer (the server closing on bytes still arriving) is no failure here.
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  void Promise.resolve(talk(socket, closed)).catch(() => {});
  const timer = setTimeout(() => socket.destroy(), withinMs);
  await closed;
  clearTimeout(timer);
  const ms = performance.now() - start;
  if (ms >= withinMs)
    throw new Error(
      `the connection was still open after ${withinMs} ms (received: ${JSON.stringify(received.slice(0, 200))})`,
    );
  const [head, body] = received.split('\r\n\r\n');
  const headers = new Map(
    head!
      .split('\r\n')
      .slice(1)
      .map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  );
  return { head: head!, headers, body: body ?? '', ms };
}

/** Sends raw bytes on a new connection to the server on default bounds and reads the answer. */
const rawExchange = (bytes: string) => rawSession(server.port, (socket) => socket.write(bytes));

/** `bytes` written `size` at a time, `everyMs` apart, until the connection closes. */
async function trickle(
  socket: net.Socket,
  closed: Promise<void>,
  bytes: Buffer,
  size: number,
  everyMs: number,
): Promise<void> {
  let open = true;
  void closed.then(() => (open = false));
  for (let i = 0; i < bytes.length && open; i += size) {
    socket.write(bytes.subarray(i, i + size));
    await sleep(everyMs);
  }
}

/** The answer is the error body of `code` with its status, request id, Cache-Control and Connection: close. */
function expectErrorAnswer(res: RawAnswer, code: string, status: number): void {
  expect(res.head, res.body).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
  const requestId = res.headers.get('x-request-id');
  expect(requestId).toMatch(/^req_/);
  expect(res.headers.get('content-type')).toBe('application/json');
  expect(res.headers.get('cache-control')).toBe('no-store');
  expect(res.headers.get('connection')).toBe('close');
  const body = JSON.parse(res.body) as Record<string, unknown>;
  expect(body).toMatchObject({ status, code, requestId });
  expect(typeof body.error).toBe('string');
}

describe("requests Node's parser refuses", () => {
  it('431 for oversized headers and 400 for a malformed request, each with the error body, its request id and Connection: close', async () => {
    const cases = [
      {
        bytes: `GET /api/v1/credits/balance HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'x'.repeat(20_000)}\r\n\r\n`,
        error: new ApiError('headers_too_large', 'Request headers too large'),
      },
      {
        bytes: 'GET /api/v1/credits/balance HTTP/1.1\r\nBad Header: x\r\n\r\n',
        error: new ApiError('bad_request', 'Malformed HTTP request'),
      },
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

describe('requests whose URL or Host cannot be parsed', () => {
  it('are answered with the error body and its headers, never a bare 400 or a dropped connection', async () => {
    const heads = [
      'GET http://[::1/api/v1/credits/balance HTTP/1.1\r\nHost: x\r\n',
      'GET /api/v1/credits/balance HTTP/1.1\r\nHost: [::1\r\n',
      'GET /api/v1/credits/balance HTTP/1.1\r\nHost: a b\r\n',
      'GET /api/v1/credits/balance HTTP/1.1\r\nHost: x:99999\r\n',
      'GET /api/v1/credits/balance HTTP/1.1\r\nHost: a@b\r\n',
      'GET /api/v1/credits/balance HTTP/1.1\r\nHost: \r\n',
      'GET /api/v1/credits/balance HTTP/1.1\r\n',
      'GET /api/v1/credits/balance HTTP/1.0\r\n',
      'GET /api/v1\\credits/balance HTTP/1.1\r\nHost: x\r\n',
      'OPTIONS * HTTP/1.1\r\nHost: x\r\n',
      'CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n',
    ];
    for (const head of heads) {
      const res = await rawExchange(`${head}\r\n`);
      expectErrorAnswer(res, 'bad_request', 400);
    }
    // An expectation Node does not know reaches the app (RFC 9110 lets a server ignore it), which
    // answers the request as it is: here, without a key.
    const expect417 = await rawExchange(
      'GET /api/v1/credits/balance HTTP/1.1\r\nHost: x\r\nExpect: something\r\nConnection: close\r\n\r\n',
    );
    expectErrorAnswer(expect417, 'unauthorized', 401);
  });
});

describe('a client that hangs up mid-body', () => {
  it('is logged at info as an aborted request, never as a 500 or at error level: chunked JSON, JSON of a declared length, a multipart upload', async () => {
    const { apiKey } = await t.newTenant();
    const { body: form, contentType } = multipart([{ name: 'file', value: wav(64_000), filename: 'a.wav' }]);
    const cases = [
      {
        path: '/api/v1/api-keys',
        head: 'Content-Type: application/json\r\nTransfer-Encoding: chunked',
        part: '10\r\n{"name":"cut off',
      },
      {
        path: '/api/v1/api-keys',
        head: 'Content-Type: application/json\r\nContent-Length: 200',
        part: '{"name":"cut off',
      },
      {
        path: '/api/v1/assets',
        head: `Content-Type: ${contentType}\r\nContent-Length: ${form.length}`,
        part: form.subarray(0, 20_000).toString('latin1'),
      },
    ];
    for (const c of cases) {
      logs = [];
      const received = new Promise<IncomingMessage>((resolve) => server.server.once('request', resolve));
      await rawSession(server.port, async (socket) => {
        socket.write(
          `POST ${c.path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\n${c.head}\r\n\r\n${c.part}`,
          'latin1',
        );
        // Hangs up once the app is reading the body.
        const req = await received;
        await waitFor('the app reading the body', () => req.readableDidRead || undefined);
        socket.destroy();
      });
      await waitFor(
        `the abort of ${c.head} logged`,
        () => logs.find((l) => l.msg === 'request aborted' || l.level >= 50),
        { timeoutMs: 20_000 },
      );
      const where = `${c.head}: ${JSON.stringify(logs)}`;
      expect(
        logs.filter((l) => l.level >= 50),
        where,
      ).toEqual([]);
      expect(
        logs.find((l) => l.msg === 'request aborted'),
        where,
      ).toMatchObject({ level: 30, path: c.path });
    }
  });
});

describe('a stalled or trickled request', () => {
  let apiKey = '';
  beforeAll(async () => {
    apiKey = (await t.newTenant()).apiKey;
  });
  const post = (path: string, head: string) =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\n${head}\r\n\r\n`;
  const json = (declared: number) =>
    post('/api/v1/api-keys', `Content-Type: application/json\r\nContent-Length: ${declared}`);

  it('a head that stops, or trickles a byte at a time, is answered 408 once its time is up and the connection closed', async () => {
    const stopped = await rawSession(limited.port, (socket) =>
      socket.write('GET /api/v1/credits/balance HTTP/1.1\r\nHost: x\r\nAuthoriz'),
    );
    expectErrorAnswer(stopped, 'request_aborted', 408);
    const trickled = await rawSession(limited.port, (socket, closed) =>
      trickle(
        socket,
        closed,
        Buffer.from(`GET /api/v1/credits/balance HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\n\r\n`),
        1,
        20,
      ),
    );
    expectErrorAnswer(trickled, 'request_aborted', 408);
    // A connection that sends nothing at all.
    expectErrorAnswer(await rawSession(limited.port, () => {}), 'request_aborted', 408);
    // One that keeps its side open once answered: the server's is closed all the same (bytes
    // written after the answer meet a reset, which closes the connection here).
    const halfOpen = await rawSession(
      limited.port,
      (socket, closed) => {
        socket.write('GET / HTTP/1.1\r\n');
        socket.once('end', () => void trickle(socket, closed, Buffer.from('more'), 1, 100));
      },
      undefined,
      { allowHalfOpen: true },
    );
    expectErrorAnswer(halfOpen, 'request_aborted', 408);
  });

  it('a body that stops is answered 408, under the request id the app gave it, and its connection closed: JSON, chunked, multipart', async () => {
    const { body: form, contentType } = multipart([{ name: 'file', value: wav(64_000), filename: 'a.wav' }]);
    const starts = [
      `${json(200)}{"name":"stalled`,
      `${post('/api/v1/api-keys', 'Content-Type: application/json\r\nTransfer-Encoding: chunked')}10\r\n{"name":"stalled`,
      `${post('/api/v1/assets', `Content-Type: ${contentType}\r\nContent-Length: ${form.length}`)}${form.subarray(0, 20_000).toString('latin1')}`,
    ];
    for (const start of starts) {
      logs = [];
      const res = await rawSession(limited.port, (socket) => socket.write(start, 'latin1'));
      expectErrorAnswer(res, 'request_aborted', 408);
      // Logged at info under the id the app gave the request, the one the answer carries.
      expect(
        logs.filter((l) => l.level >= 50),
        JSON.stringify(logs),
      ).toEqual([]);
      expect(logs.find((l) => l.msg === 'request body stalled')).toMatchObject({
        level: 30,
        requestId: res.headers.get('x-request-id'),
      });
    }
  });

  it('a body trickled under the minimum rate is answered 408 after a window, not once it has trickled in full', async () => {
    const body = Buffer.from(
      JSON.stringify({ name: 'a trickle of a name, one byte at a time', scopes: ['credits:read'] }),
    );
    // 20 bytes/s against the 100 required: the whole body would take 4 s.
    const res = await rawSession(limited.port, (socket, closed) => {
      socket.write(json(body.length));
      return trickle(socket, closed, body, 1, 50);
    });
    expectErrorAnswer(res, 'request_aborted', 408);
    expect(JSON.parse(res.body)).toMatchObject({ error: expect.stringContaining('stalled') });
  });

  it('a body that keeps the rate but never ends is answered 408 once the whole request is past its time', async () => {
    // 400 bytes/s: never a stall, but 8000 bytes would take 20 s.
    const res = await rawSession(limited.port, (socket, closed) => {
      socket.write(json(8000));
      return trickle(socket, closed, Buffer.from(`{"name":"${'x'.repeat(7_988)}"}`), 40, 100);
    });
    expectErrorAnswer(res, 'request_aborted', 408);
    expect(JSON.parse(res.body)).toMatchObject({ error: expect.stringContaining('did not arrive in full') });
    // Not before the request's time: the rate was kept throughout.
    expect(res.ms).toBeGreaterThan(LIMITS.requestTimeoutMs - 100);
  });

  it('a slow upload that keeps the rate is served: multipart asset and JSON bodies over several windows', async () => {
    const { body: form, contentType } = multipart([{ name: 'file', value: wav(16_000), filename: 'slow.wav' }]);
    const upload = await rawSession(limited.port, (socket, closed) => {
      socket.write(
        post('/api/v1/assets', `Content-Type: ${contentType}\r\nContent-Length: ${form.length}\r\nConnection: close`),
      );
      // About 1.2 s for the body: three stall windows.
      return trickle(socket, closed, form, Math.ceil(form.length / 12), 100);
    });
    expect(upload.head, upload.body).toMatch(/^HTTP\/1\.1 201 /);
    expect(JSON.parse(upload.body)).toMatchObject({ kind: 'audio', status: 'ready' });

    // JSON padded with whitespace to 500 bytes: 1.25 s at 400 bytes/s, four times the rate asked.
    const body = Buffer.from(JSON.stringify({ name: 'slow', scopes: ['credits:read'] }).padEnd(500, ' '));
    const created = await rawSession(limited.port, (socket, closed) => {
      socket.write(
        post(
          '/api/v1/api-keys',
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close`,
        ),
      );
      return trickle(socket, closed, body, 20, 50);
    });
    expect(created.head, created.body).toMatch(/^HTTP\/1\.1 201 /);
  });

  it("a body the app has not read yet is the server's wait, not a stall", async () => {
    // The whole body sent at once, but read only after three stall windows: it sits in the
    // request's buffer and the socket's, and no byte moves meanwhile.
    const slowReader = await startApiServer(
      async (req) => {
        await sleep(LIMITS.bodyStallMs * 3);
        return new Response(String((await req.arrayBuffer()).byteLength));
      },
      { port: 0, hostname: '127.0.0.1', limits: LIMITS },
    );
    try {
      const body = Buffer.alloc(256 * 1024, 'z');
      const res = await rawSession(slowReader.port, (socket) => {
        socket.write(`POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
        socket.write(body);
      });
      expect(res.head).toMatch(/^HTTP\/1\.1 200 /);
      expect(res.body).toBe(String(body.length));
    } finally {
      await slowReader.close({ timeoutMs: 500 });
    }
  });
});
