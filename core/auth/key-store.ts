import type { Sql, Tx } from '../platform/db/index.ts';
import { ApiError } from '../platform/errors.ts';
import type { Logger } from '../platform/log.ts';
import { mintKey, mintLegacyKey, parseApiKey, secretMatches, sha256, type Scope } from './keys.ts';
import { assertNests } from './lineage.ts';

/** Who is calling: what a verified key grants. */
export interface Principal {
  apiKeyId: string;
  tenantId: string;
  scopes: string[];
  spendLimitCreditMicros: number | null;
  /** Set when the caller is a signed-in dashboard page (its session's key), not a bearer key. */
  dashboardSessionId?: string;
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
  /** Spent by this key and every key minted under it (their spend counts against this key's limit). */
  spentCreditMicros: number;
  /** The key that minted this one (null for a root key: the admin CLI's, or one older than lineage). */
  parentId: string | null;
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
  parent_id: string | null;
  ancestor_ids: string[];
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
}

interface CachedKey extends KeyRow {
  tenant_status: string;
  /** The earliest expiry among the keys above this one (null: none of them expires). */
  ancestors_expire_at: Date | null;
  ancestor_revoked: boolean;
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
  parentId: r.parent_id,
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
  /**
   * The key minting this one (POST /api-keys: the caller). The new key must nest inside it
   * (core/auth/lineage.ts), its spend counts against it, and revoking it revokes the new key.
   */
  parentId?: string | null;
}

/** A minting key as a mint reads it: its own row and its chain's tightest terms. */
interface MinterRow {
  id: string;
  tenant_id: string;
  scopes: string[];
  ancestor_ids: string[];
  chain_revoked: boolean;
  chain_limit: number | null;
  chain_expires_at: Date | null;
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
    const sub = await this.sql.listen(
      'auth_changed',
      () => this.forget(),
      () => this.forget(),
    );
    this.unlisten = () => sub.unlisten();
  }

  async close(): Promise<void> {
    await this.unlisten?.();
  }

  /**
   * Mints a key; with `parentId`, a key nested inside that one (403 forbidden naming the field when
   * it asks for more than its minter has; 401 when the minter was revoked or expired meanwhile).
   */
  async create(input: CreateKeyInput): Promise<{ record: ApiKeyRecord; apiKey: string }> {
    const minted = input.legacyEnvironment ? mintLegacyKey(input.legacyEnvironment) : mintKey();
    const limit = input.spendLimitCreditMicros ?? null;
    const expiresAt = input.expiresAt ?? null;
    const parentId = input.parentId ?? null;
    const insert = async (tx: Tx, ancestorIds: string[]) => {
      const [row] = await tx<KeyRow[]>`
        insert into api_keys (id, key_id, tenant_id, name, secret_hash, legacy, redacted_key, scopes,
                              spend_limit_credit_micros, expires_at, parent_id, ancestor_ids)
        values (${minted.id}, ${minted.keyId}, ${input.tenantId}, ${input.name}, ${minted.secretHash},
                ${minted.legacy}, ${minted.redactedKey}, ${input.scopes}, ${limit}, ${expiresAt},
                ${parentId}, ${ancestorIds}::text[])
        returning *`;
      return row!;
    };
    const row = await (this.sql.begin(async (tx) => {
      if (parentId === null) return insert(tx, []);
      // The tenant's lock, shared: a revocation takes it exclusively, so it either sees this key
      // (and revokes it too) or this mint sees the minter revoked. See revoke().
      await tx`select 1 from credit_wallets where tenant_id = ${input.tenantId} for share`;
      const minter = await this.minter(tx, parentId);
      if (!minter || minter.tenant_id !== input.tenantId)
        throw new ApiError('not_found', 'The minting key was not found in this tenant');
      if (minter.chain_revoked) throw unauthorized('API key has been revoked');
      if (minter.chain_expires_at && minter.chain_expires_at.getTime() <= Date.now())
        throw unauthorized('API key has expired');
      assertNests(
        {
          id: minter.id,
          scopes: minter.scopes,
          spendLimitCreditMicros: minter.chain_limit,
          expiresAt: minter.chain_expires_at,
        },
        { scopes: input.scopes, spendLimitCreditMicros: limit, expiresAt },
      );
      return insert(tx, [...minter.ancestor_ids, minter.id]);
    }) as Promise<KeyRow>);
    return { record: toRecord(row), apiKey: minted.apiKey };
  }

  /** The minting key with its chain's state: any key of it revoked, its tightest limit, its earliest expiry. */
  private async minter(tx: Tx, id: string): Promise<MinterRow | undefined> {
    const [m] = await tx<MinterRow[]>`
      select p.id, p.tenant_id, p.scopes, p.ancestor_ids,
             bool_or(a.status <> 'active') as chain_revoked,
             min(a.spend_limit_credit_micros) as chain_limit,
             min(a.expires_at) as chain_expires_at
      from api_keys p join api_keys a on a.id = any(p.ancestor_ids || p.id)
      where p.id = ${id}
      group by p.id`;
    return m;
  }

  async list(tenantId: string): Promise<ApiKeyRecord[]> {
    const rows = await this.sql<
      KeyRow[]
    >`select * from api_keys where tenant_id = ${tenantId} order by created_at desc`;
    return rows.map(toRecord);
  }

  /**
   * Revokes a key and every key minted under it (at any depth); returns the key and how many
   * descendants were revoked with it (already revoked ones not counted). Every process's cache
   * drops the revoked keys through the trigger's NOTIFY.
   */
  async revoke(id: string): Promise<(ApiKeyRecord & { revokedDescendants: number }) | undefined> {
    const rows = await (this.sql.begin(async (tx) => {
      // The tenant's lock, exclusive, before the statement that finds the descendants: a mint under
      // this key holds it shared until its row is committed, so none is missed (see create()).
      await tx`select 1 from credit_wallets w join api_keys k on k.tenant_id = w.tenant_id where k.id = ${id} for update of w`;
      return tx<(KeyRow & { was_active: boolean })[]>`
        update api_keys k set status = 'revoked', revoked_at = coalesce(k.revoked_at, now())
        from api_keys old
        where old.id = k.id and (k.id = ${id} or ${id} = any(k.ancestor_ids))
        returning k.*, old.status = 'active' as was_active`;
    }) as Promise<(KeyRow & { was_active: boolean })[]>);
    this.forget();
    const self = rows.find((r) => r.id === id);
    if (!self) return undefined;
    const revokedDescendants = rows.filter((r) => r.id !== id && r.was_active).length;
    if (revokedDescendants > 0)
      this.log?.info({ apiKeyId: id, revokedDescendants }, 'api key revoked with the keys it minted');
    return { ...toRecord(self), revokedDescendants };
  }

  /**
   * Verifies `Authorization` and returns the caller. 401 for a missing, malformed, unknown,
   * revoked or expired key; 403 tenant_not_active for a suspended workspace.
   */
  async verify(authorization: string | undefined): Promise<Principal> {
    return (await this.check(authorization, false))!;
  }

  /**
   * As `verify`, from this process's cache only: undefined (and no query) when the key was not
   * verified here recently. What a client address blocked for failed authentications still gets:
   * a real key it shares the address with keeps working, a made-up one costs nothing.
   */
  verifyCached(authorization: string | undefined): Promise<Principal | undefined> {
    return this.check(authorization, true);
  }

  private async check(authorization: string | undefined, cachedOnly: boolean): Promise<Principal | undefined> {
    if (!authorization) throw unauthorized('Missing API key: send Authorization: Bearer <API_KEY>');
    const m = /^Bearer +(\S+)\s*$/i.exec(authorization);
    if (!m) throw unauthorized('Malformed Authorization header: expected "Bearer <API_KEY>"');
    const parsed = parseApiKey(m[1]!);
    if (!parsed) throw unauthorized('Malformed API key: expected svc_<keyId>_<secret>');

    const cacheKey = parsed.kind === 'current' ? `k:${parsed.keyId}` : `l:${sha256(parsed.fullKey).toString('hex')}`;
    const row = cachedOnly ? this.cached(cacheKey) : await this.find(cacheKey, parsed);
    if (cachedOnly && !row) return undefined;
    const presented = parsed.kind === 'current' ? parsed.secret : parsed.fullKey;
    // Hash and compare even when no row was found, so timing does not reveal whether a keyId exists.
    const matches = secretMatches(presented, row?.secret_hash ?? NO_KEY_HASH);
    if (!row || !matches) throw unauthorized('Invalid API key');
    if (row.status !== 'active') throw unauthorized('API key has been revoked');
    if (row.expires_at && row.expires_at.getTime() <= Date.now()) throw unauthorized('API key has expired');
    // A minted key lives no longer than the keys above it. Revocation cascades and mints refuse a
    // later expiry; this re-checks the chain, read with the row, so neither rule alone is load-bearing.
    if (row.ancestor_revoked) throw unauthorized('API key has been revoked: a key it was minted under was revoked');
    if (row.ancestors_expire_at && row.ancestors_expire_at.getTime() <= Date.now()) {
      throw unauthorized('API key has expired: a key it was minted under has expired');
    }
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
  private async find(
    cacheKey: string,
    parsed: NonNullable<ReturnType<typeof parseApiKey>>,
  ): Promise<CachedKey | undefined> {
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
    // The chain above the key comes with its row, in the same query: the cache holds it, and any
    // revocation up the chain drops the cache (NOTIFY), while expiries are compared at each verify.
    const chain = this.sql`
      (select min(a.expires_at) from api_keys a where a.id = any(k.ancestor_ids)) as ancestors_expire_at,
      exists(select 1 from api_keys a where a.id = any(k.ancestor_ids) and a.status <> 'active') as ancestor_revoked`;
    const rows =
      parsed.kind === 'current'
        ? await this.sql<CachedKey[]>`
            select k.*, t.status as tenant_status, ${chain} from api_keys k join tenants t on t.id = k.tenant_id
            where k.key_id = ${parsed.keyId} and not k.legacy`
        : await this.sql<CachedKey[]>`
            select k.*, t.status as tenant_status, ${chain} from api_keys k join tenants t on t.id = k.tenant_id
            where k.legacy and k.secret_hash = ${sha256(parsed.fullKey)}`;
    if (rows.length === 0) this.log?.debug({ kind: parsed.kind }, 'api key not found');
    return rows[0];
  }
}
