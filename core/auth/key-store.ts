import type { Sql } from '../db/index.ts';
import { ApiError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { mintKey, mintLegacyKey, parseApiKey, secretMatches, sha256, type Scope } from './keys.ts';

/** Who is calling: what a verified key grants. */
export interface Principal {
  apiKeyId: string;
  tenantId: string;
  scopes: string[];
  spendLimitCreditMicros: number | null;
}

export interface ApiKeyRecord {
  id: string;
  keyId: string;
  tenantId: string;
  name: string;
  redactedKey: string;
  scopes: string[];
  status: 'active' | 'revoked';
  legacy: boolean;
  spendLimitCreditMicros: number | null;
  spentCreditMicros: number;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
}

interface KeyRow {
  id: string;
  key_id: string;
  tenant_id: string;
  name: string;
  secret_hash: Buffer;
  legacy: boolean;
  redacted_key: string;
  scopes: string[];
  status: 'active' | 'revoked';
  spend_limit_credit_micros: number | null;
  spent_credit_micros: number;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
}

interface CachedKey extends KeyRow {
  tenant_status: string;
}

const toRecord = (r: KeyRow): ApiKeyRecord => ({
  id: r.id,
  keyId: r.key_id,
  tenantId: r.tenant_id,
  name: r.name,
  redactedKey: r.redacted_key,
  scopes: r.scopes,
  status: r.status,
  legacy: r.legacy,
  spendLimitCreditMicros: r.spend_limit_credit_micros,
  spentCreditMicros: r.spent_credit_micros,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  revokedAt: r.revoked_at,
});

export interface CreateKeyInput {
  tenantId: string;
  name: string;
  scopes: Scope[];
  spendLimitCreditMicros?: number | null;
  expiresAt?: Date | null;
  legacyEnvironment?: 'live' | 'test';
}

/** Verified keys stay cached this long at most; a change to a key or tenant drops the cache at once (NOTIFY). */
const CACHE_TTL_MS = 30_000;
const CACHE_MAX = 50_000;
/**
 * Ids that matched no key are remembered this long, so a client repeating a made-up or deleted key
 * costs no database query; in their own bounded map (oldest out first), so a flood of made-up ids
 * never evicts the verified keys. A key is never presented before it is minted (its id is random),
 * so a remembered miss cannot hide a new key.
 */
const UNKNOWN_TTL_MS = 10_000;
const UNKNOWN_MAX = 20_000;
/** What a presented secret is compared with when no key matched: the same hash and comparison as a found key. */
const NO_KEY_HASH = Buffer.alloc(32);

const unauthorized = (why: string) => new ApiError('unauthorized', why);

/**
 * API keys: minting, listing, revoking, and verification of a bearer value on every request.
 * Verification is served from a small cache so the hot path needs no database round trip; the
 * cache is invalidated by the `auth_changed` notification that a trigger sends on any change.
 */
export class KeyStore {
  private cache = new Map<string, { row: CachedKey; at: number }>();
  /** Cache keys of ids that matched no key, with when they were looked up. */
  private unknown = new Map<string, number>();
  private unlisten?: () => Promise<void>;

  constructor(
    private readonly sql: Sql,
    private readonly log?: Logger,
  ) {}

  /** Subscribes to invalidations; call once per process before serving. */
  async listen(): Promise<void> {
    const sub = await this.sql.listen('auth_changed', () => this.forget(), () => this.forget());
    this.unlisten = () => sub.unlisten();
  }

  async close(): Promise<void> {
    await this.unlisten?.();
  }

  async create(input: CreateKeyInput): Promise<{ record: ApiKeyRecord; apiKey: string }> {
    const minted = input.legacyEnvironment ? mintLegacyKey(input.legacyEnvironment) : mintKey();
    const [row] = await this.sql<KeyRow[]>`
      insert into api_keys (id, key_id, tenant_id, name, secret_hash, legacy, redacted_key, scopes,
                            spend_limit_credit_micros, expires_at)
      values (${minted.id}, ${minted.keyId}, ${input.tenantId}, ${input.name}, ${minted.secretHash},
              ${minted.legacy}, ${minted.redactedKey}, ${input.scopes}, ${input.spendLimitCreditMicros ?? null},
              ${input.expiresAt ?? null})
      returning *`;
    return { record: toRecord(row!), apiKey: minted.apiKey };
  }

  async list(tenantId: string): Promise<ApiKeyRecord[]> {
    const rows = await this.sql<KeyRow[]>`select * from api_keys where tenant_id = ${tenantId} order by created_at desc`;
    return rows.map(toRecord);
  }

  async revoke(id: string): Promise<ApiKeyRecord | undefined> {
    const [row] = await this.sql<KeyRow[]>`
      update api_keys set status = 'revoked', revoked_at = coalesce(revoked_at, now())
      where id = ${id} returning *`;
    this.forget();
    return row && toRecord(row);
  }

  /**
   * Verifies `Authorization` and returns the caller. 401 for a missing, malformed, unknown,
   * revoked or expired key; 403 tenant_not_active for a suspended workspace.
   */
  async verify(authorization: string | undefined): Promise<Principal> {
    if (!authorization) throw unauthorized('Missing API key: send Authorization: Bearer <API_KEY>');
    const m = /^Bearer +(\S+)\s*$/i.exec(authorization);
    if (!m) throw unauthorized('Malformed Authorization header: expected "Bearer <API_KEY>"');
    const parsed = parseApiKey(m[1]!);
    if (!parsed) throw unauthorized('Malformed API key: expected svc_<keyId>_<secret>');

    const cacheKey = parsed.kind === 'current' ? `k:${parsed.keyId}` : `l:${sha256(parsed.fullKey).toString('hex')}`;
    const row = await this.find(cacheKey, parsed);
    const presented = parsed.kind === 'current' ? parsed.secret : parsed.fullKey;
    // Hash and compare even when no row was found, so timing does not reveal whether a keyId exists.
    const matches = secretMatches(presented, row?.secret_hash ?? NO_KEY_HASH);
    if (!row || !matches) throw unauthorized('Invalid API key');
    if (row.status !== 'active') throw unauthorized('API key has been revoked');
    if (row.expires_at && row.expires_at.getTime() <= Date.now()) throw unauthorized('API key has expired');
    if (row.tenant_status !== 'active') throw new ApiError('tenant_not_active', 'Tenant is not active');
    return {
      apiKeyId: row.id,
      tenantId: row.tenant_id,
      scopes: row.scopes,
      spendLimitCreditMicros: row.spend_limit_credit_micros,
    };
  }

  /**
   * The key behind `cacheKey`, or undefined: the same steps whether or not it exists (a cache
   * probe; on a miss one query, whose answer is remembered either way), so that neither the work
   * nor the time tells a made-up id from a real one.
   */
  private async find(cacheKey: string, parsed: NonNullable<ReturnType<typeof parseApiKey>>): Promise<CachedKey | undefined> {
    const hit = this.cached(cacheKey);
    if (hit || this.knownUnknown(cacheKey)) return hit;
    const row = await this.lookup(parsed);
    if (row) this.remember(cacheKey, row);
    else {
      if (this.unknown.size >= UNKNOWN_MAX) this.unknown.delete(this.unknown.keys().next().value!);
      this.unknown.set(cacheKey, Date.now());
    }
    return row;
  }

  private knownUnknown(key: string): boolean {
    const at = this.unknown.get(key);
    if (at === undefined) return false;
    if (Date.now() - at <= UNKNOWN_TTL_MS) return true;
    this.unknown.delete(key);
    return false;
  }

  /** Drops everything remembered, found or not (a key or tenant changed). */
  private forget(): void {
    this.cache.clear();
    this.unknown.clear();
  }

  private cached(key: string): CachedKey | undefined {
    const hit = this.cache.get(key);
    if (!hit) return undefined;
    if (Date.now() - hit.at > CACHE_TTL_MS) {
      this.cache.delete(key);
      return undefined;
    }
    return hit.row;
  }

  private remember(key: string, row: CachedKey): void {
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(key, { row, at: Date.now() });
  }

  private async lookup(parsed: NonNullable<ReturnType<typeof parseApiKey>>): Promise<CachedKey | undefined> {
    const rows =
      parsed.kind === 'current'
        ? await this.sql<CachedKey[]>`
            select k.*, t.status as tenant_status from api_keys k join tenants t on t.id = k.tenant_id
            where k.key_id = ${parsed.keyId} and not k.legacy`
        : await this.sql<CachedKey[]>`
            select k.*, t.status as tenant_status from api_keys k join tenants t on t.id = k.tenant_id
            where k.legacy and k.secret_hash = ${sha256(parsed.fullKey)}`;
    if (rows.length === 0) this.log?.debug({ kind: parsed.kind }, 'api key not found');
    return rows[0];
  }
}
