import type { RateLimiter } from '../platform/coord/rate-limiter.ts';
import type { Logger } from '../platform/log.ts';
import { clientBucket } from '../platform/net/ip.ts';

/** Blocked clients remembered by one process at most; past it the oldest block is forgotten first. */
const MAX_BLOCKED = 100_000;

/**
 * Failed authentications per client address (an IPv6 client by its /64). Each failure takes a point
 * of a shared fixed-window limiter (Redis when configured); once a client's points are spent it is
 * blocked until the window ends. The block is also kept in this process's memory, so a blocked
 * client's next requests are refused before the key is even parsed: a flood of made-up keys then
 * costs no database query and no Redis round trip. Every other process learns of the block at its
 * first failure from that client (one lookup per process and window).
 */
export class AuthFailureThrottle {
  /** Client bucket to the time its block ends (ms since the epoch). */
  private readonly blocked = new Map<string, number>();

  constructor(
    private readonly limiter: RateLimiter,
    private readonly log?: Logger,
  ) {}

  /** Milliseconds until `address` may try again; 0 when it is not blocked. */
  blockedFor(address: string): number {
    const bucket = clientBucket(address);
    const until = this.blocked.get(bucket);
    if (until === undefined) return 0;
    const left = until - Date.now();
    if (left > 0) return left;
    this.blocked.delete(bucket);
    return 0;
  }

  /** Counts a failed authentication of `address`; the milliseconds it is now blocked for, 0 while within the bound. */
  async failed(address: string): Promise<number> {
    const bucket = clientBucket(address);
    let res;
    try {
      res = await this.limiter.consume(bucket);
    } catch (err) {
      // The throttle protects the service; an outage of its store must not turn 401s into 500s.
      this.log?.warn({ err }, 'auth failure throttle unavailable');
      return 0;
    }
    if (res.allowed) return 0;
    if (this.blocked.size >= MAX_BLOCKED) this.blocked.delete(this.blocked.keys().next().value!);
    this.blocked.set(bucket, Date.now() + res.retryAfterMs);
    return res.retryAfterMs;
  }
}
