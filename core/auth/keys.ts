import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from '../platform/ids.ts';

/**
 * API key format: svc_<keyId>_<secret>. keyId (16 base62) finds the row; the secret (43 base62,
 * about 256 bits) is stored only as its SHA-256 and compared in constant time. Legacy keys
 * (svc_live_<secret>, svc_test_<secret>) have no keyId: they are found by the hash of the whole key.
 */
export const SCOPES = [
  '*',
  'api_keys:write',
  'credits:read',
  'avatars:read',
  'avatars:write',
  'realtime:write',
  'usage:read',
  'usage:write',
  'recordings:read',
] as const;
export type Scope = (typeof SCOPES)[number];

export const DEFAULT_KEY_SCOPES: Scope[] = ['realtime:write', 'credits:read', 'avatars:read'];

const KEY_ID_LENGTH = 16;
const SECRET_LENGTH = 43;
type LegacyEnvironment = 'live' | 'test';

export type ParsedKey = { kind: 'current'; keyId: string; secret: string } | { kind: 'legacy'; fullKey: string };

const CURRENT = /^svc_([0-9A-Za-z]{16})_([0-9A-Za-z]{20,128})$/;
const LEGACY = /^svc_(live|test)_([0-9A-Za-z_-]{16,128})$/;

/** Parses a bearer value; undefined when it is not shaped like any key we issue. */
export function parseApiKey(value: string): ParsedKey | undefined {
  const legacy = LEGACY.exec(value);
  if (legacy) return { kind: 'legacy', fullKey: value };
  const m = CURRENT.exec(value);
  if (m) return { kind: 'current', keyId: m[1]!, secret: m[2]! };
  return undefined;
}

export function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function secretMatches(presented: string, storedHash: Uint8Array): boolean {
  const h = sha256(presented);
  return storedHash.length === h.length && timingSafeEqual(h, storedHash);
}

export interface MintedKey {
  id: string;
  keyId: string;
  apiKey: string;
  secretHash: Buffer;
  redactedKey: string;
  legacy: boolean;
}

function redact(prefix: string, secret: string): string {
  return `${prefix}${'*'.repeat(8)}${secret.slice(-4)}`;
}

export function mintKey(): MintedKey {
  // 16 characters, so a keyId can never read as the legacy "live"/"test" prefix.
  const keyId = randomBase62(KEY_ID_LENGTH);
  const secret = randomBase62(SECRET_LENGTH);
  return {
    id: `svc_${keyId}`,
    keyId,
    apiKey: `svc_${keyId}_${secret}`,
    secretHash: sha256(secret),
    redactedKey: redact(`svc_${keyId}_`, secret),
    legacy: false,
  };
}

/** A key in the legacy format (kept for tenants migrating older integrations). */
export function mintLegacyKey(environment: LegacyEnvironment): MintedKey {
  const secret = randomBytes(32).toString('hex');
  const apiKey = `svc_${environment}_${secret}`;
  const keyId = `legacy${randomBase62(10)}`;
  return {
    id: `svc_${keyId}`,
    keyId,
    apiKey,
    secretHash: sha256(apiKey),
    redactedKey: redact(`svc_${environment}_`, secret),
    legacy: true,
  };
}

/** Does a key holding `held` scopes grant `needed`? */
export function hasScope(held: readonly string[], needed: Scope): boolean {
  return held.includes('*') || held.includes(needed);
}
