import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { redisConnections } from '../../../test/helpers.ts';
import { memoryRateLimiter, redisRateLimiter, type RateLimiter, type RateLimitOptions } from './rate-limiter.ts';

const redisConnection = redisConnections();

const sharedRedis = redisConnection();

interface Flavour {
  name: string;
  make(o: RateLimitOptions): RateLimiter;
}

const flavours: Flavour[] = [
  { name: 'in-process (memoryRateLimiter)', make: (o) => memoryRateLimiter(o) },
  { name: 'Redis (redisRateLimiter)', make: (o) => redisRateLimiter(sharedRedis, o) },
];

const prefix = () => `rl-test-${randomUUID()}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(flavours)('rate limiter contract: $name', ({ make }) => {
  it('allows exactly N in a window, then refuses with retryAfterMs > 0', async () => {
    const rl = make({ points: 5, windowSeconds: 60, keyPrefix: prefix() });
    const results = [];
    for (let i = 0; i < 7; i++) results.push(await rl.consume('svc_key1'));
    expect(results.map((r) => r.allowed)).toEqual([true, true, true, true, true, false, false]);
    expect(results.slice(0, 5).map((r) => r.remaining)).toEqual([4, 3, 2, 1, 0]);
    for (const refused of results.slice(5)) {
      expect(refused.remaining).toBe(0);
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(60_000);
    }
    for (const ok of results.slice(0, 5)) expect(ok.retryAfterMs).toBe(0);
  });

  it('allows exactly 120 of many concurrent requests in a 60 s window (the per-key rate limit)', async () => {
    const rl = make({ points: 120, windowSeconds: 60, keyPrefix: prefix() });
    const results = await Promise.all(Array.from({ length: 160 }, () => rl.consume('svc_busy')));
    expect(results.filter((r) => r.allowed)).toHaveLength(120);
    expect(results.filter((r) => !r.allowed).every((r) => r.retryAfterMs > 0)).toBe(true);
  });

  it('counts each key on its own', async () => {
    const rl = make({ points: 2, windowSeconds: 60, keyPrefix: prefix() });
    await rl.consume('svc_a');
    await rl.consume('svc_a');
    expect((await rl.consume('svc_a')).allowed).toBe(false);
    expect(await rl.consume('svc_b')).toMatchObject({ allowed: true, remaining: 1 });
    expect((await rl.consume('svc_b')).allowed).toBe(true);
    expect((await rl.consume('svc_b')).allowed).toBe(false);
  });

  it('allows again once the window has passed', async () => {
    const rl = make({ points: 2, windowSeconds: 1, keyPrefix: prefix() });
    expect((await rl.consume('svc_w')).allowed).toBe(true);
    expect((await rl.consume('svc_w')).allowed).toBe(true);
    const refused = await rl.consume('svc_w');
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(1_000);
    await sleep(refused.retryAfterMs + 100);
    expect(await rl.consume('svc_w')).toMatchObject({ allowed: true, remaining: 1 });
  });
});

describe('rate limiter on Redis: several API processes', () => {
  it('two limiters on two separate Redis connections share one count per key (exactly N in total)', async () => {
    const keyPrefix = prefix();
    const a = redisRateLimiter(redisConnection(), { points: 120, windowSeconds: 60, keyPrefix });
    const b = redisRateLimiter(redisConnection(), { points: 120, windowSeconds: 60, keyPrefix });
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? a : b).consume('svc_shared')),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(120);
    // Both processes now refuse the key, and another key is unaffected.
    expect((await a.consume('svc_shared')).allowed).toBe(false);
    expect((await b.consume('svc_shared')).allowed).toBe(false);
    expect((await b.consume('svc_other')).allowed).toBe(true);
  });

  it('a store failure is an error, not a silent allow', async () => {
    const broken = redisConnection();
    broken.disconnect();
    const rl = redisRateLimiter(broken, { points: 5, windowSeconds: 60, keyPrefix: prefix() });
    await expect(rl.consume('svc_x')).rejects.toThrow();
  });
});
