import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';

/** Fixed-window request throttle keyed by an opaque id (the API key id). */
export interface RateLimiter {
  /** Takes one point; `allowed` false once the window's points are spent. */
  consume(key: string): Promise<{ allowed: boolean; remaining: number; retryAfterMs: number }>;
}

export interface RateLimitOptions {
  points: number;
  windowSeconds: number;
  keyPrefix?: string;
}

function wrap(limiter: RateLimiterMemory | RateLimiterRedis): RateLimiter {
  return {
    async consume(key) {
      try {
        const res = await limiter.consume(key, 1);
        return { allowed: true, remaining: res.remainingPoints, retryAfterMs: 0 };
      } catch (err) {
        // rate-limiter-flexible rejects with RateLimiterRes when over the limit, with an Error on store failure.
        if (err instanceof RateLimiterRes) {
          return { allowed: false, remaining: 0, retryAfterMs: Math.max(1, err.msBeforeNext) };
        }
        throw err;
      }
    },
  };
}

/** Single process only: the embedded default. */
export function memoryRateLimiter(o: RateLimitOptions): RateLimiter {
  return wrap(new RateLimiterMemory({ points: o.points, duration: o.windowSeconds, keyPrefix: o.keyPrefix ?? 'rl' }));
}

/** Shared by every API process on one Redis. */
export function redisRateLimiter(redis: Redis, o: RateLimitOptions): RateLimiter {
  return wrap(
    new RateLimiterRedis({
      storeClient: redis,
      points: o.points,
      duration: o.windowSeconds,
      keyPrefix: o.keyPrefix ?? 'rl',
    }),
  );
}
