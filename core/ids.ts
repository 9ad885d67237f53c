import { randomBytes, randomInt } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniform random base62 string (rejection-free: randomInt is unbiased). */
export function randomBase62(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHABET[randomInt(ALPHABET.length)];
  return out;
}

/** Id prefixes of every resource: stable, so a client can tell ids apart at a glance. */
export const ID_PREFIX = {
  tenant: 'ten',
  apiKey: 'svc',
  avatar: 'ava',
  asset: 'ast',
  reservation: 'rsv',
  session: 'ses',
  request: 'req',
  ledgerEntry: 'led',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

export function newId(kind: IdKind, length = 20): string {
  return `${ID_PREFIX[kind]}_${randomBase62(length)}`;
}

export function newRequestId(): string {
  return `req_${randomBytes(12).toString('base64url')}`;
}
