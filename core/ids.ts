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
  scene: 'scn',
  videoCache: 'vc',
  recording: 'rec',
  queueTicket: 'qtk',
  worker: 'wrk',
  conversation: 'cnv',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

export function newId(kind: IdKind, length = 20): string {
  return `${ID_PREFIX[kind]}_${randomBase62(length)}`;
}

// Request ids need uniqueness, not secrecy: a random per-process prefix and a counter are unique
// across processes and cost nothing on the hot path.
const REQUEST_ID_PREFIX = `req_${randomBytes(6).toString('base64url')}`;
let requestCounter = 0;

export function newRequestId(): string {
  requestCounter = (requestCounter + 1) % Number.MAX_SAFE_INTEGER;
  return `${REQUEST_ID_PREFIX}${requestCounter.toString(36).padStart(6, '0')}`;
}
