import { createHmac, timingSafeEqual } from 'node:crypto';
import { loadLocalSecret } from '../local-secret.ts';
import { MAX_SIGNED_URL_TTL_SECONDS } from './types.ts';

/** File under DATA_DIR holding the media signing secret when MEDIA_SIGNING_SECRET is not set. */
export const SIGNING_SECRET_FILE = 'media-signing.secret';

/**
 * The secret behind signed media URLs: MEDIA_SIGNING_SECRET when configured (several API processes
 * must share it), otherwise a random one created once in DATA_DIR with mode 0600 (never inside the
 * served media folder).
 */
export function loadSigningSecret(dataDir: string, configured?: string): string {
  return loadLocalSecret(dataDir, SIGNING_SECRET_FILE, configured);
}

/** HMAC-SHA256 signatures of (key, expiry) pairs, with a key derived from the secret for this one use. */
export class MediaSigner {
  private readonly hmacKey: Buffer;

  constructor(secret: string) {
    this.hmacKey = createHmac('sha256', secret).update('avatar-platform media url v1').digest();
  }

  sign(key: string, exp: number): string {
    return createHmac('sha256', this.hmacKey).update(`${key}\n${exp}`).digest('base64url');
  }

  /** True when `sig` signs (key, exp) and exp is in the future but not beyond the longest lifetime. */
  verify(key: string, exp: unknown, sig: unknown, nowMs = Date.now()): boolean {
    return this.check(key, exp, sig, nowMs) === 'valid';
  }

  /**
   * What a (key, exp, sig) triple is: `valid`; `expired` (a signature this secret made, whose time
   * has passed); or `invalid` (not ours, tampered with, or with an expiry beyond the longest lifetime).
   */
  check(key: string, exp: unknown, sig: unknown, nowMs = Date.now()): 'valid' | 'expired' | 'invalid' {
    if (
      typeof exp !== 'string' ||
      typeof sig !== 'string' ||
      !/^\d{1,12}$/.test(exp) ||
      !/^[A-Za-z0-9_-]{43}$/.test(sig)
    )
      return 'invalid';
    const expSeconds = Number(exp);
    const now = Math.floor(nowMs / 1000);
    // Compare the exact string we issue (43 ASCII characters, checked above), not its decoded bytes:
    // base64url's last character carries padding bits, so other spellings decode to the same bytes.
    const expected = Buffer.from(this.sign(key, expSeconds), 'ascii');
    const given = Buffer.from(sig, 'ascii');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'invalid';
    if (expSeconds > now + MAX_SIGNED_URL_TTL_SECONDS + 60) return 'invalid';
    return expSeconds <= now ? 'expired' : 'valid';
  }
}
