import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_KEY_SCOPES,
  hasScope,
  mintKey,
  mintLegacyKey,
  parseApiKey,
  secretMatches,
  sha256,
  type Scope,
} from './keys.ts';

const sha256Hex = (v: string) => createHash('sha256').update(v, 'utf8').digest('hex');

describe('API key format', () => {
  it('mints keys as svc_<keyId>_<secret> that parse back to their keyId and secret', () => {
    for (let i = 0; i < 50; i++) {
      const k = mintKey();
      expect(k.apiKey).toMatch(/^svc_[0-9A-Za-z]{16}_[0-9A-Za-z]{43}$/);
      expect(k.id).toBe(`svc_${k.keyId}`);
      expect(k.legacy).toBe(false);
      const parsed = parseApiKey(k.apiKey);
      expect(parsed).toEqual({ kind: 'current', keyId: k.keyId, secret: k.apiKey.slice(`svc_${k.keyId}_`.length) });
    }
  });

  it('mints a different key every time', () => {
    const keys = new Set(Array.from({ length: 200 }, () => mintKey().apiKey));
    const ids = new Set(Array.from({ length: 200 }, () => mintKey().keyId));
    expect(keys.size).toBe(200);
    expect(ids.size).toBe(200);
  });

  it('a current key whose keyId begins with "live" or "test" is still a current key', () => {
    const secret = 'A'.repeat(43);
    expect(parseApiKey(`svc_liveABCDEFGHIJKL_${secret}`)).toEqual({
      kind: 'current',
      keyId: 'liveABCDEFGHIJKL',
      secret,
    });
    expect(parseApiKey(`svc_test0123456789ab_${secret}`)).toEqual({
      kind: 'current',
      keyId: 'test0123456789ab',
      secret,
    });
  });

  it('parses legacy svc_live_... and svc_test_... keys as legacy, keeping the whole key', () => {
    const live = `svc_live_${'a1'.repeat(16)}`;
    const test = `svc_test_${'Zz_-'.repeat(5)}`;
    expect(parseApiKey(live)).toEqual({ kind: 'legacy', fullKey: live });
    expect(parseApiKey(test)).toEqual({ kind: 'legacy', fullKey: test });
    for (const env of ['live', 'test'] as const) {
      const k = mintLegacyKey(env);
      expect(k.apiKey.startsWith(`svc_${env}_`)).toBe(true);
      expect(k.legacy).toBe(true);
      expect(parseApiKey(k.apiKey)).toEqual({ kind: 'legacy', fullKey: k.apiKey });
    }
  });

  it.each([
    ['empty', ''],
    ['prefix only', 'svc_'],
    ['no secret', `svc_${'a'.repeat(16)}`],
    ['no secret after separator', `svc_${'a'.repeat(16)}_`],
    ['short keyId', `svc_${'a'.repeat(15)}_${'b'.repeat(43)}`],
    ['long keyId', `svc_${'a'.repeat(17)}_${'b'.repeat(43)}`],
    ['short secret', `svc_${'a'.repeat(16)}_${'b'.repeat(19)}`],
    ['overlong secret', `svc_${'a'.repeat(16)}_${'b'.repeat(129)}`],
    ['symbol in secret', `svc_${'a'.repeat(16)}_${'b'.repeat(42)}!`],
    ['wrong prefix', `sk_${'a'.repeat(16)}_${'b'.repeat(43)}`],
    ['upper-case prefix', `SVC_${'a'.repeat(16)}_${'b'.repeat(43)}`],
    ['bearer included', `Bearer svc_${'a'.repeat(16)}_${'b'.repeat(43)}`],
    ['trailing space', `svc_${'a'.repeat(16)}_${'b'.repeat(43)} `],
    ['unknown legacy environment', `svc_prod_${'b'.repeat(43)}`],
    ['short legacy secret', `svc_live_${'b'.repeat(15)}`],
    ['legacy with a dot', `svc_live_${'b'.repeat(20)}.x`],
  ])('a malformed value (%s) parses to undefined', (_name, value) => {
    expect(parseApiKey(value)).toBeUndefined();
  });
});

describe('API key secrets', () => {
  it('stores only the SHA-256 of the secret, and the redacted form shows only its last 4 characters', () => {
    const k = mintKey();
    const secret = k.apiKey.slice(`svc_${k.keyId}_`.length);
    expect(k.secretHash).toHaveLength(32);
    expect(k.secretHash.toString('hex')).toBe(sha256Hex(secret));
    expect(k.redactedKey).toBe(`svc_${k.keyId}_********${secret.slice(-4)}`);
    expect(k.redactedKey).not.toContain(secret);
    expect(k.redactedKey).not.toContain(secret.slice(0, 8));
    expect(k.redactedKey).not.toContain(k.apiKey);
  });

  it('stores a legacy key as the SHA-256 of the whole key, redacted to its last 4 characters', () => {
    const k = mintLegacyKey('live');
    const secret = k.apiKey.slice('svc_live_'.length);
    expect(k.secretHash.toString('hex')).toBe(sha256Hex(k.apiKey));
    expect(k.redactedKey).toBe(`svc_live_********${secret.slice(-4)}`);
    expect(k.redactedKey).not.toContain(secret);
  });

  it('sha256 is the SHA-256 digest', () => {
    expect(sha256('abc').toString('hex')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('secretMatches accepts the secret and refuses anything else', () => {
    const k = mintKey();
    const parsed = parseApiKey(k.apiKey);
    if (parsed?.kind !== 'current') throw new Error('expected a current key');
    expect(secretMatches(parsed.secret, k.secretHash)).toBe(true);
    expect(secretMatches(k.secretHash.toString('hex'), k.secretHash)).toBe(false);
    const flipped = parsed.secret.slice(0, -1) + (parsed.secret.endsWith('A') ? 'B' : 'A');
    expect(secretMatches(flipped, k.secretHash)).toBe(false);
    expect(secretMatches('', k.secretHash)).toBe(false);
    expect(secretMatches(k.apiKey, k.secretHash)).toBe(false);
    expect(secretMatches(parsed.secret, mintKey().secretHash)).toBe(false);
  });

  it('secretMatches refuses a stored hash of the wrong length instead of throwing', () => {
    expect(secretMatches('whatever', Buffer.alloc(16))).toBe(false);
    expect(secretMatches('whatever', Buffer.alloc(0))).toBe(false);
  });
});

describe('scopes', () => {
  it('a key holding a scope has it; other scopes are refused', () => {
    const held = ['realtime:write', 'credits:read'];
    expect(hasScope(held, 'realtime:write')).toBe(true);
    expect(hasScope(held, 'credits:read')).toBe(true);
    expect(hasScope(held, 'avatars:write')).toBe(false);
    expect(hasScope(held, 'usage:read')).toBe(false);
    expect(hasScope([], 'credits:read')).toBe(false);
  });

  it('the * scope grants every scope', () => {
    const all: Scope[] = [
      'api_keys:write',
      'credits:read',
      'avatars:read',
      'avatars:write',
      'realtime:write',
      'usage:read',
      'usage:write',
      'recordings:read',
    ];
    for (const s of all) expect(hasScope(['*'], s)).toBe(true);
  });

  it('a scope matches exactly, not by prefix or case', () => {
    expect(hasScope(['avatars'], 'avatars:read')).toBe(false);
    expect(hasScope(['avatars:read'], 'avatars:write')).toBe(false);
    expect(hasScope(['Credits:Read'], 'credits:read')).toBe(false);
  });

  it('the default scopes start calls and read, but write no avatars', () => {
    expect([...DEFAULT_KEY_SCOPES].sort()).toEqual(['avatars:read', 'credits:read', 'realtime:write']);
    expect(hasScope(DEFAULT_KEY_SCOPES, 'avatars:write')).toBe(false);
  });
});
