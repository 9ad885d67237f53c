/**
 * The throttle of failed authentications, over real HTTP (the client address is the socket's): a
 * flood of made-up keys from one address is cut off after its bound, answered without a key lookup,
 * while a real key from another address, or one verified recently from the same, goes on as before.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { clientBucket } from '../../core/platform/net/ip.ts';
import { testApi } from '../../test/helpers.ts';
import { startApiServer, type ApiServer } from '../server.ts';

const BOUND = 5;
// Its own Redis prefix: the counts are per address, and every test file connects from 127.0.0.1.
const t = await testApi({
  redis: true,
  env: {
    AUTH_FAILURE_LIMIT_POINTS: String(BOUND),
    AUTH_FAILURE_LIMIT_WINDOW_SECONDS: '60',
    REDIS_KEY_PREFIX: `test-authfail-${process.pid}-${Date.now()}:`,
  },
});
let server: ApiServer;
beforeAll(async () => {
  server = await startApiServer(t.app.fetch, { port: 0, hostname: '127.0.0.1' });
});
afterAll(async () => {
  await server.close({ timeoutMs: 1000 });
  await t.close();
});

interface Answer {
  status: number;
  headers: Map<string, string>;
  body: Record<string, unknown>;
}

/** One GET /credits/balance over its own connection from `from` (any 127/8 address is this host). */
function get(from: string, key: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port: server.port, host: '127.0.0.1', localAddress: from });
    const chunks: Buffer[] = [];
    socket.on('connect', () =>
      socket.write(
        `GET /api/v1/credits/balance HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`,
      ),
    );
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', body = ''] = text.split('\r\n\r\n');
      const [status, ...lines] = head.split('\r\n');
      const headers = new Map(
        lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      resolve({ status: Number(status!.split(' ')[1]), headers, body: JSON.parse(body) as Record<string, unknown> });
    });
  });
}

const madeUp = (i: number) => `svc_${`made${i}`.padEnd(16, 'x')}_${'s'.repeat(43)}`;

describe('failed authentications per client address', () => {
  it(`a flood of made-up keys from one address is 429 after ${BOUND} failures, without key lookups; a real key from another address, or one already verified, is unaffected`, async () => {
    const { apiKey } = await t.newTenant();
    expect((await get('127.0.0.2', apiKey)).status).toBe(200);

    for (let i = 0; i < BOUND; i++) expect((await get('127.0.0.1', madeUp(i))).status).toBe(401);
    const verify = vi.spyOn(t.services.keys, 'verify');
    const flood: Answer[] = [];
    for (let i = BOUND; i < BOUND + 20; i++) flood.push(await get('127.0.0.1', madeUp(i)));
    // The failure past the bound was looked up (it found the bound spent); none after it.
    expect(verify).toHaveBeenCalledTimes(1);
    verify.mockRestore();
    for (const res of flood) {
      expect(res.status).toBe(429);
      // The per-key rate limit's shape: no code, retryable, Retry-After, the request id.
      expect(res.body).toMatchObject({ status: 429, retryable: true, requestId: res.headers.get('x-request-id') });
      expect(res.body).not.toHaveProperty('code');
      expect(res.body.error).toMatch(/^Too many failed authentications from this address: 5 per 60 seconds/);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    }
    // Until the window ends the blocked address gets only what needs no lookup: a key this process
    // verified recently (a real client behind the same address) passes; one it never saw is refused.
    const cachedOnly = vi.spyOn(t.services.keys, 'verify');
    expect((await get('127.0.0.1', apiKey)).status).toBe(200);
    const { apiKey: unseen } = await t.newTenant();
    expect((await get('127.0.0.1', unseen)).status).toBe(429);
    expect(cachedOnly).not.toHaveBeenCalled();
    cachedOnly.mockRestore();

    // Another address: the real key works, and its own failures are its own.
    expect((await get('127.0.0.2', apiKey)).status).toBe(200);
    expect((await get('127.0.0.3', madeUp(99))).status).toBe(401);
  });

  it('counts IPv4 as is (mapped or not) and IPv6 by its /64', () => {
    expect(clientBucket('203.0.113.7')).toBe('203.0.113.7');
    expect(clientBucket('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(clientBucket('2001:db8:1:2:aaaa::1')).toBe(clientBucket('2001:db8:1:2:ffff:ffff:ffff:ffff'));
    expect(clientBucket('2001:db8:1:2::1')).toBe('20010db800010002::/64');
    expect(clientBucket('2001:db8:1:3::1')).not.toBe(clientBucket('2001:db8:1:2::1'));
    expect(clientBucket('fe80::1%eth0')).toBe('fe80000000000000::/64');
  });
});
