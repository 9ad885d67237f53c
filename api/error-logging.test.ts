import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { SafeFetcher } from '../core/platform/net/safe-fetch.ts';
import { json, testApi } from '../test/helpers.ts';

/** Every line the API logs, parsed. */
const lines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString('utf8').split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
    done();
  },
});
const t = await testApi({ log: pino({ level: 'info' }, sink) });
// Port 1 of loopback, allowed for this test: nothing listens there (connection refused).
t.services.safeFetch = new SafeFetcher({ allowAddresses: ['127.0.0.1:1'] });
afterAll(async () => {
  await t.services.safeFetch.close();
  await t.close();
});

const WARN = 40;
const ERROR = 50;
const logged = (requestId: string) => lines.filter((l) => l.requestId === requestId);

describe('what a failed request logs', () => {
  it('an expected upstream failure (a remote that cannot be reached) is a warning with its code and reason, no stack', async () => {
    const { apiKey } = await t.newTenant();
    const res = await t.request('POST', '/api/v1/assets/remote', {
      key: apiKey,
      body: { kind: 'image', remoteUrl: 'http://127.0.0.1:1/p.png' },
    });
    expect(res.status).toBe(502);
    expect(await json(res)).toMatchObject({ code: 'upstream_unreachable' });
    const [line, ...more] = logged(res.headers.get('x-request-id')!);
    expect(more).toEqual([]);
    expect(line).toMatchObject({
      level: WARN,
      msg: 'request failed upstream',
      code: 'upstream_unreachable',
      path: '/api/v1/assets/remote',
      reason: expect.any(String),
    });
    expect(JSON.stringify(line)).not.toMatch(/stack|\n\s+at /);
  });

  it('an unexpected failure (a bug) is an error with its stack', async () => {
    const { apiKey } = await t.newTenant();
    const broken = vi.spyOn(t.services.ledger, 'balance').mockRejectedValue(new Error('boom'));
    try {
      const res = await t.request('GET', '/api/v1/credits/balance', { key: apiKey });
      expect(res.status).toBe(500);
      const [line] = logged(res.headers.get('x-request-id')!);
      expect(line).toMatchObject({
        level: ERROR,
        msg: 'request failed',
        err: { message: 'boom', stack: expect.stringContaining('Error: boom') },
      });
    } finally {
      broken.mockRestore();
    }
  });
});
