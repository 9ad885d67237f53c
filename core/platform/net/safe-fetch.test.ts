import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { text } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forbiddenReason } from './ip.ts';
import { SafeFetcher, SafeFetchError, type Resolver } from './safe-fetch.ts';

/**
 * Every origin here is on loopback, which the fetcher must refuse: tests exempt exactly
 * 127.0.0.1:<port A> through the test-only allowlist and prove that every hop elsewhere is refused
 * before any connection is made. No traffic ever leaves loopback (10.x and the like are refused
 * before connecting, and nothing listens there).
 */

interface Origin {
  port: number;
  connections: number;
  hits: string[];
  bytesSent: number;
  /** Settles when the last /endless response closed (ended, or cut off by the client). */
  endlessClosed?: Promise<void>;
  server: http.Server;
}

async function origin(
  handler: (req: http.IncomingMessage, res: http.ServerResponse, o: Origin) => void,
): Promise<Origin> {
  const o = { port: 0, connections: 0, hits: [] as string[], bytesSent: 0 } as Origin;
  o.server = http.createServer((req, res) => {
    o.hits.push(req.url ?? '');
    handler(req, res, o);
  });
  o.server.on('connection', () => o.connections++);
  await new Promise<void>((r) => o.server.listen(0, '127.0.0.1', r));
  o.port = (o.server.address() as AddressInfo).port;
  return o;
}

let A: Origin;
let B: Origin;
const pending = new Set<http.ServerResponse>();

beforeAll(async () => {
  A = await origin((req, res, o) => {
    const u = new URL(req.url ?? '/', 'http://x');
    const p = u.pathname;
    if (p === '/hello') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('hello world');
    } else if (p === '/redirect') {
      res.writeHead(Number(u.searchParams.get('status') ?? 302), { location: u.searchParams.get('to') ?? '/hello' });
      res.end();
    } else if (p.startsWith('/chain/')) {
      const n = Number(p.split('/')[2]);
      res.writeHead(302, { location: n > 0 ? `/chain/${n - 1}` : '/hello' });
      res.end();
    } else if (p === '/big-declared') {
      res.writeHead(200, { 'content-length': String(10_000_000) });
      res.write(Buffer.alloc(1024));
      pending.add(res);
    } else if (p === '/endless') {
      // No Content-Length: the cap must cut the stream while it flows.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      o.endlessClosed = new Promise((r) => res.once('close', () => r()));
      const chunk = Buffer.alloc(16 * 1024, 1);
      const pump = () => {
        while (!res.destroyed && o.bytesSent < 50_000_000) {
          o.bytesSent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    } else if (p === '/no-headers') {
      pending.add(res); // never answers
    } else if (p === '/stall-body') {
      res.writeHead(200);
      res.write('partial');
      pending.add(res);
    } else if (p === '/drip') {
      res.writeHead(200);
      const t = setInterval(() => (res.destroyed ? clearInterval(t) : res.write('.')), 50);
    } else if (p === '/status') {
      res.writeHead(Number(u.searchParams.get('code')));
      res.end('nope');
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  B = await origin((_req, res) => res.end('B'));
});

afterAll(async () => {
  for (const r of pending) r.destroy();
  A.server.closeAllConnections();
  B.server.closeAllConnections();
  await Promise.all([new Promise((r) => A.server.close(r)), new Promise((r) => B.server.close(r))]);
});

/** A fetcher that may reach exactly 127.0.0.1:<port A>. */
function fetcher(extra: ConstructorParameters<typeof SafeFetcher>[0] = {}) {
  return new SafeFetcher({ allowAddresses: [`127.0.0.1:${A.port}`], ...extra });
}

async function refusal(p: Promise<unknown>): Promise<SafeFetchError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'expected a SafeFetchError').toBeInstanceOf(SafeFetchError);
  return err as SafeFetchError;
}

describe('address rules (forbiddenReason)', () => {
  it('refuses loopback, private, CGNAT, link-local, metadata, ULA, multicast, reserved and IPv4-in-IPv6', () => {
    const refused = [
      '127.0.0.1',
      '127.255.255.254',
      '0.0.0.0',
      '10.0.0.1',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '100.64.0.1',
      '100.127.255.255',
      '169.254.169.254',
      '169.254.0.1',
      '192.0.0.8',
      '192.0.2.1',
      '198.18.0.1',
      '198.51.100.7',
      '203.0.113.9',
      '224.0.0.1',
      '239.255.255.250',
      '240.0.0.1',
      '255.255.255.255',
      '::',
      '::1',
      'fe80::1',
      'febf::1',
      'fc00::1',
      'fd12:3456::1',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:10.0.0.1',
      '::ffff:169.254.169.254',
      '64:ff9b::a00:1',
      '64:ff9b::7f00:1',
      '::127.0.0.1',
      '2001:db8::1',
      '2002:7f00:1::',
      '2001::1',
      'fe80::1%eth0',
      '100::1',
      'not-an-ip',
    ];
    for (const ip of refused) expect(forbiddenReason(ip), ip).toBeDefined();
    const allowed = [
      '1.1.1.1',
      '8.8.8.8',
      '93.184.216.34',
      '100.63.255.255',
      '100.128.0.1',
      '172.32.0.1',
      '169.253.0.1',
      '2606:4700::1111',
      '2a00:1450:4001::1',
      '::ffff:8.8.8.8',
      '64:ff9b::808:808',
    ];
    for (const ip of allowed) expect(forbiddenReason(ip), ip).toBeUndefined();
  });
});

describe('SafeFetcher: happy paths', () => {
  it('fetches from the allowed origin and follows a same-origin redirect', async () => {
    const f = fetcher();
    const res = await f.fetch(`http://127.0.0.1:${A.port}/redirect?to=/hello`, { maxBytes: 1024 });
    expect(res.status).toBe(200);
    expect(res.url).toBe(`http://127.0.0.1:${A.port}/hello`);
    expect(res.contentType).toBe('text/plain');
    expect(await text(res.body)).toBe('hello world');
    await f.close();
  });

  it('follows up to 5 redirects, and refuses the sixth', async () => {
    const f = fetcher();
    const ok = await f.fetch(`http://127.0.0.1:${A.port}/chain/4`, { maxBytes: 1024 });
    expect(await text(ok.body)).toBe('hello world');
    const err = await refusal(f.fetch(`http://127.0.0.1:${A.port}/chain/5`, { maxBytes: 1024 }));
    expect(err.reason).toBe('too_many_redirects');
    await f.close();
  });

  it('connects to a hostname through its resolved address, which is checked', async () => {
    const resolve: Resolver = async (h) => (h === 'media.example.test' ? [{ address: '127.0.0.1', family: 4 }] : []);
    const f = fetcher({ resolve });
    const res = await f.fetch(`http://media.example.test:${A.port}/hello`, { maxBytes: 1024 });
    expect(await text(res.body)).toBe('hello world');
    await f.close();
  });
});

describe('SafeFetcher: security', () => {
  it('refuses URLs with other schemes or credentials', async () => {
    const f = fetcher();
    for (const url of [
      'ftp://example.com/x',
      'file:///etc/passwd',
      'data:text/plain,hi',
      'javascript:alert(1)',
      'gopher://x/',
      'not a url',
      `http://user:pw@127.0.0.1:${A.port}/hello`,
      `http://user@127.0.0.1:${A.port}/hello`,
    ]) {
      expect((await refusal(f.fetch(url, { maxBytes: 10 }))).reason, url).toBe('invalid_url');
    }
    await f.close();
  });

  it('refuses literal forbidden addresses, in every spelling, before connecting', async () => {
    const f = new SafeFetcher(); // no allowlist at all
    const before = A.connections;
    const urls = [
      `http://127.0.0.1:${A.port}/hello`,
      `http://2130706433:${A.port}/hello`,
      `http://0x7f.1:${A.port}/hello`,
      `http://127.1:${A.port}/hello`,
      `http://[::1]:${A.port}/hello`,
      `http://[::ffff:127.0.0.1]:${A.port}/hello`,
      `http://0.0.0.0:${A.port}/hello`,
      'http://10.0.0.1/',
      'http://192.168.0.10:8080/',
      'http://172.20.1.1/',
      'http://100.64.1.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[fd00::1]/',
      'http://[fe80::1]/',
      'https://10.0.0.1/',
    ];
    for (const url of urls) {
      const err = await refusal(f.fetch(url, { maxBytes: 10 }));
      expect(err.reason, url).toBe('forbidden_address');
    }
    expect(A.connections).toBe(before);
    await f.close();
  });

  it('refuses a hostname that resolves to loopback or a private address, before connecting', async () => {
    const before = A.connections;
    const plain = new SafeFetcher();
    expect((await refusal(plain.fetch(`http://localhost:${A.port}/hello`, { maxBytes: 10 }))).reason).toBe(
      'forbidden_address',
    );
    const resolve: Resolver = async (h) =>
      ({
        'internal.test': [{ address: '10.1.2.3', family: 4 }],
        'metadata.test': [{ address: '169.254.169.254', family: 4 }],
        'ula.test': [{ address: 'fd00::5', family: 6 }],
        // One good address does not excuse a bad one (connecting could pick either).
        'mixed.test': [
          { address: '127.0.0.1', family: 4 },
          { address: '10.0.0.7', family: 4 },
        ],
      })[h] ?? [];
    const f = fetcher({ resolve });
    for (const host of ['internal.test', 'metadata.test', 'ula.test', 'mixed.test']) {
      const err = await refusal(f.fetch(`http://${host}:${A.port}/hello`, { maxBytes: 10 }));
      expect(err.reason, host).toBe('forbidden_address');
    }
    expect(A.connections).toBe(before);
    await plain.close();
    await f.close();
  });

  it('refuses a redirect hop to any other forbidden address: 127.0.0.2, ::1, 10.0.0.1, metadata, another port, a bad hostname', async () => {
    const resolve: Resolver = async (h) =>
      h === 'rebind.test' ? [{ address: '192.168.1.20', family: 4 }] : [{ address: '127.0.0.1', family: 4 }];
    const f = fetcher({ resolve });
    const targets = [
      `http://127.0.0.2:${A.port}/hello`,
      `http://[::1]:${A.port}/hello`,
      'http://10.0.0.1/secret',
      'http://169.254.169.254/latest/meta-data/iam/',
      `http://127.0.0.1:${B.port}/`,
      `http://localhost:${B.port}/`,
      'http://rebind.test/',
      'http://[::ffff:a00:1]/',
    ];
    const bBefore = B.connections;
    for (const to of targets) {
      for (const status of [302, 307]) {
        const hitsBefore = A.hits.length;
        const err = await refusal(
          f.fetch(`http://127.0.0.1:${A.port}/redirect?status=${status}&to=${encodeURIComponent(to)}`, {
            maxBytes: 1024,
          }),
        );
        expect(err.reason, `${status} to ${to}`).toBe('forbidden_address');
        expect(A.hits.length - hitsBefore).toBe(1);
      }
    }
    expect(B.connections, 'the other loopback port was never connected to').toBe(bBefore);
    for (const to of ['file:///etc/passwd', 'ftp://example.com/', `http://u:p@127.0.0.1:${A.port}/hello`]) {
      const err = await refusal(
        f.fetch(`http://127.0.0.1:${A.port}/redirect?to=${encodeURIComponent(to)}`, { maxBytes: 1024 }),
      );
      expect(err.reason, to).toBe('invalid_url');
    }
    await f.close();
  });
});

describe('SafeFetcher: caps and timeouts', () => {
  it('refuses a declared Content-Length over the cap up front', async () => {
    const f = fetcher();
    const err = await refusal(f.fetch(`http://127.0.0.1:${A.port}/big-declared`, { maxBytes: 1_000_000 }));
    expect(err.reason).toBe('too_large');
    await f.close();
  });

  it('cuts an oversize body off while it streams, and stops the download', async () => {
    const f = fetcher();
    A.bytesSent = 0;
    const res = await f.fetch(`http://127.0.0.1:${A.port}/endless`, { maxBytes: 256 * 1024 });
    let received = 0;
    const err = await refusal(
      (async () => {
        for await (const chunk of res.body) received += (chunk as Buffer).length;
      })(),
    );
    expect(err.reason).toBe('too_large');
    expect(received).toBeLessThanOrEqual(256 * 1024);
    // The origin stopped long before its 50 MB: the connection was closed at the cap.
    await A.endlessClosed;
    expect(A.bytesSent).toBeLessThan(20_000_000);
    await f.close();
  });

  it('times out waiting for headers, on a stalled body, and on the total deadline', async () => {
    const f = fetcher({ headersTimeoutMs: 300, bodyIdleTimeoutMs: 300, totalTimeoutMs: 60_000 });
    const t0 = Date.now();
    expect((await refusal(f.fetch(`http://127.0.0.1:${A.port}/no-headers`, { maxBytes: 1024 }))).reason).toBe(
      'timeout',
    );
    expect(Date.now() - t0).toBeLessThan(5_000);
    const stalled = await f.fetch(`http://127.0.0.1:${A.port}/stall-body`, { maxBytes: 1024 });
    expect((await refusal(text(stalled.body))).reason).toBe('timeout');
    await f.close();

    const slow = fetcher({ totalTimeoutMs: 500 });
    const drip = await slow.fetch(`http://127.0.0.1:${A.port}/drip`, { maxBytes: 1024 * 1024 });
    const t1 = Date.now();
    expect((await refusal(text(drip.body))).reason).toBe('timeout');
    expect(Date.now() - t1).toBeLessThan(3_000);
    await slow.close();
  });

  it('reports upstream HTTP errors and unreachable origins', async () => {
    const f = new SafeFetcher({ allowAddresses: [`127.0.0.1:${A.port}`, '127.0.0.1:1'] });
    const err = await refusal(f.fetch(`http://127.0.0.1:${A.port}/status?code=404`, { maxBytes: 1024 }));
    expect(err).toMatchObject({ reason: 'http_status', status: 404 });
    expect((await refusal(f.fetch(`http://127.0.0.1:${A.port}/status?code=503`, { maxBytes: 1024 }))).status).toBe(503);
    // Port 1 is closed: connection refused.
    expect((await refusal(f.fetch('http://127.0.0.1:1/', { maxBytes: 1024 }))).reason).toBe('unreachable');
    await f.close();
  });

  it('checkTarget answers before any request: forbidden literal or resolved addresses refused, an unresolvable host let through', async () => {
    const resolve: Resolver = async (h) => {
      if (h === 'gone.test') throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      return (
        {
          'internal.test': [{ address: '10.1.2.3', family: 4 }],
          'public.test': [{ address: '93.184.215.14', family: 4 }],
        }[h] ?? []
      );
    };
    const f = fetcher({ resolve });
    const before = A.connections;
    for (const url of [
      'http://127.0.0.1:1/x',
      'http://internal.test/x',
      'http://[::1]/x',
      'http://169.254.169.254/latest',
    ]) {
      expect((await refusal(f.checkTarget(url))).reason, url).toBe('forbidden_address');
    }
    for (const url of ['ftp://public.test/x', 'http://user:pw@public.test/x', 'not a url']) {
      expect((await refusal(f.checkTarget(url))).reason, url).toBe('invalid_url');
    }
    expect((await f.checkTarget('https://public.test/clip.mp4')).hostname).toBe('public.test');
    expect((await f.checkTarget('http://gone.test/clip.mp4')).hostname).toBe('gone.test');
    // The test allowlist applies as in fetch.
    expect((await f.checkTarget(`http://127.0.0.1:${A.port}/hello`)).port).toBe(String(A.port));
    expect(A.connections).toBe(before);
    await f.close();
  });
});
