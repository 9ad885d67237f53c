import { randomFillSync, randomInt } from 'node:crypto';

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
  dashboardSession: 'dss',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

export function newId(kind: IdKind, length = 20): string {
  return `${ID_PREFIX[kind]}_${randomBase62(length)}`;
}

/** Random bytes for request ids, drawn in bulk: one system call per few hundred requests. */
const REQUEST_ID_RANDOM_BYTES = 12;
const requestIdPool = Buffer.alloc(REQUEST_ID_RANDOM_BYTES * 512);
let requestIdPoolAt = requestIdPool.length;

/**
 * A request id: `req_`, the time in milliseconds (9 base36 digits, so ids sort roughly by time),
 * then 96 random bits (16 base64url characters). Request ids are shown to every client, so they
 * must not be a counter: a sequence shared by all tenants would let anyone count the platform's
 * traffic between two of their own requests.
 */
export function newRequestId(): string {
  if (requestIdPoolAt === requestIdPool.length) {
    randomFillSync(requestIdPool);
    requestIdPoolAt = 0;
  }
  const random = requestIdPool.toString('base64url', requestIdPoolAt, requestIdPoolAt + REQUEST_ID_RANDOM_BYTES);
  requestIdPoolAt += REQUEST_ID_RANDOM_BYTES;
  return `req_${Date.now().toString(36).padStart(9, '0')}${random}`;
}
