import { randomBytes } from 'node:crypto';
import type { KeyStore, ApiKeyRecord } from '../auth/key-store.ts';
import { sha256, type Scope } from '../auth/keys.ts';
import type { Sql } from '../platform/db/index.ts';
import { ApiError } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import type { Logger } from '../platform/log.ts';
import type { KeyVault } from './vault.ts';

export const DASHBOARD_ROLES = ['owner', 'admin', 'member'] as const;
export type DashboardRole = (typeof DASHBOARD_ROLES)[number];

/**
 * What a role may do through the API. Owners and admins manage keys (`*` holds api_keys:write);
 * members use everything else of the workspace but never see or make a key.
 */
const ROLE_SCOPES: Record<DashboardRole, Scope[]> = {
  owner: ['*'],
  admin: ['*'],
  member: ['credits:read', 'usage:read', 'recordings:read', 'avatars:read', 'avatars:write', 'realtime:write'],
};

export const canManageKeys = (role: DashboardRole) => role === 'owner' || role === 'admin';

export interface DashboardSession {
  id: string;
  tenantId: string;
  email: string;
  role: DashboardRole;
  /** The key the session's API calls act as (its secret was never kept). */
  apiKeyId: string;
  scopes: string[];
  csrfToken: string;
  expiresAt: Date;
  tenantStatus: string;
}

/** A key as the dashboard lists it: masked, and whether its full value can be shown again. */
export interface DashboardKey extends ApiKeyRecord {
  copyable: boolean;
  /** Why not, when it cannot be copied. */
  notCopyableReason: string | null;
}

export interface DashboardAuthOptions {
  linkTtlMinutes: number;
  sessionTtlHours: number;
}

interface SessionRow {
  id: string;
  tenant_id: string;
  email: string;
  role: DashboardRole;
  api_key_id: string;
  scopes: string[];
  csrf_token: string;
  expires_at: Date;
  tenant_status: string;
}

/** 256 random bits, URL-safe: sign-in links, session cookies, anti-forgery tokens. */
const token = () => randomBytes(32).toString('base64url');
const hashOf = (t: string) => sha256(t);

const toSession = (r: SessionRow): DashboardSession => ({
  id: r.id,
  tenantId: r.tenant_id,
  email: r.email,
  role: r.role,
  apiKeyId: r.api_key_id,
  scopes: r.scopes,
  csrfToken: r.csrf_token,
  expiresAt: r.expires_at,
  tenantStatus: r.tenant_status,
});

/**
 * Sign-in to the dashboard without passwords: one-time links an operator prints, sessions held in
 * a cookie, and the keys made there, whose full value owners and admins can copy again (kept
 * encrypted by the vault). Links and session tokens are stored only as their SHA-256.
 */
export class DashboardAuth {
  constructor(
    private readonly sql: Sql,
    private readonly keys: KeyStore,
    /** Made on first use: a process that never keeps or copies a key needs no secret. */
    private readonly vault: () => KeyVault,
    private readonly opts: DashboardAuthOptions,
    private readonly log?: Logger,
  ) {}

  /** A one-time sign-in token for `email` in the workspace, valid `linkTtlMinutes`. */
  async createLink(input: {
    tenantId: string;
    email: string;
    role: DashboardRole;
  }): Promise<{ token: string; expiresAt: Date }> {
    const t = token();
    const [row] = await this.sql<{ expires_at: Date }[]>`
      insert into dashboard_sign_in_links (token_hash, tenant_id, email, role, expires_at)
      values (${hashOf(t)}, ${input.tenantId}, ${input.email}, ${input.role},
              now() + make_interval(mins => ${this.opts.linkTtlMinutes}))
      returning expires_at`;
    return { token: t, expiresAt: row!.expires_at };
  }

  /**
   * Redeems a link (once: a second redemption, or one past its expiry, is 401) and opens a session:
   * its cookie value (returned once, stored hashed) and the session.
   */
  async redeem(linkToken: string): Promise<{ sessionToken: string; session: DashboardSession }> {
    const [link] = await this.sql<{ tenant_id: string; email: string; role: DashboardRole }[]>`
      update dashboard_sign_in_links set used_at = now()
      where token_hash = ${hashOf(linkToken)} and used_at is null and expires_at > now()
      returning tenant_id, email, role`;
    if (!link)
      throw new ApiError(
        'unauthorized',
        'This sign-in link is not valid: it was used already, has expired or was never issued. Ask for a new one',
      );
    const sessionToken = token();
    const id = newId('dashboardSession');
    const expiresAt = new Date(Date.now() + this.opts.sessionTtlHours * 3600_000);
    // The session's own key: what its API calls act as (usage rows, rate limit, scopes). Its secret
    // is dropped here: the key works only through the session, never as a bearer.
    const { record } = await this.keys.create({
      tenantId: link.tenant_id,
      name: `dashboard session: ${link.email}`,
      scopes: ROLE_SCOPES[link.role],
      expiresAt,
    });
    await this.sql`
      insert into dashboard_sessions (id, token_hash, csrf_token, tenant_id, email, role, api_key_id, expires_at)
      values (${id}, ${hashOf(sessionToken)}, ${token()}, ${link.tenant_id}, ${link.email}, ${link.role}, ${record.id}, ${expiresAt})`;
    this.log?.info({ dashboardSessionId: id, tenantId: link.tenant_id, role: link.role }, 'dashboard signed in');
    const session = await this.verify(sessionToken);
    return { sessionToken, session: session! };
  }

  /** The session behind a cookie value; undefined when unknown, signed out or expired. */
  async verify(sessionToken: string | undefined): Promise<DashboardSession | undefined> {
    if (!sessionToken) return undefined;
    const [row] = await this.sql<SessionRow[]>`
      select s.*, k.scopes, t.status as tenant_status
      from dashboard_sessions s join api_keys k on k.id = s.api_key_id join tenants t on t.id = s.tenant_id
      where s.token_hash = ${hashOf(sessionToken)} and s.expires_at > now() and k.status = 'active'`;
    return row && toSession(row);
  }

  /** Ends the session: its cookie no longer signs in, and its key is revoked. */
  async signOut(sessionToken: string): Promise<void> {
    const [row] = await this.sql<{ id: string; api_key_id: string }[]>`
      delete from dashboard_sessions where token_hash = ${hashOf(sessionToken)} returning id, api_key_id`;
    if (row) await this.keys.revoke(row.api_key_id);
  }

  /** Drops links and sessions past their expiry (their hashes are of no use any more; the sessions' keys expired with them). */
  async purgeExpired(): Promise<number> {
    const links = await this.sql`delete from dashboard_sign_in_links where expires_at < now()`;
    const sessions = await this.sql`delete from dashboard_sessions where expires_at < now()`;
    return links.count + sessions.count;
  }

  /** Keeps the full value of a key made in the dashboard, encrypted, so it can be copied again. */
  async keepSecret(apiKeyId: string, apiKey: string): Promise<void> {
    const sealed = this.vault().seal(apiKey, apiKeyId);
    await this.sql`
      insert into dashboard_key_secrets (api_key_id, iv, ciphertext, tag)
      values (${apiKeyId}, ${sealed.iv}, ${sealed.ciphertext}, ${sealed.tag})`;
  }

  /** The workspace's keys, masked, newest first; the sessions' own keys are not listed. */
  async listKeys(tenantId: string): Promise<DashboardKey[]> {
    const [keys, kept, sessionKeys] = await Promise.all([
      this.keys.list(tenantId),
      this.sql<{ api_key_id: string }[]>`
        select s.api_key_id from dashboard_key_secrets s join api_keys k on k.id = s.api_key_id
        where k.tenant_id = ${tenantId}`,
      this.sql<{ api_key_id: string }[]>`select api_key_id from dashboard_sessions where tenant_id = ${tenantId}`,
    ]);
    const keptIds = new Set(kept.map((r) => r.api_key_id));
    const hidden = new Set(sessionKeys.map((r) => r.api_key_id));
    return keys
      .filter((k) => !hidden.has(k.id) && !k.name.startsWith('dashboard session: '))
      .map((k) => {
        const reason = notCopyable(k, keptIds.has(k.id));
        return { ...k, copyable: reason === null, notCopyableReason: reason };
      });
  }

  /**
   * The full value of a key made in the dashboard, for an owner or admin of its workspace: 404 for
   * another workspace's key, 409 for one that cannot be copied (say why).
   */
  async copyKey(session: DashboardSession, apiKeyId: string): Promise<string> {
    if (!canManageKeys(session.role)) throw new ApiError('forbidden', 'Only owners and admins can copy keys');
    const key = (await this.keys.list(session.tenantId)).find((k) => k.id === apiKeyId);
    if (!key) throw new ApiError('not_found', `No API key ${apiKeyId} in this workspace`);
    const [sealed] = await this.sql<{ iv: Buffer; ciphertext: Buffer; tag: Buffer }[]>`
      select iv, ciphertext, tag from dashboard_key_secrets where api_key_id = ${apiKeyId}`;
    const reason = notCopyable(key, Boolean(sealed));
    if (reason) throw new ApiError('key_not_copyable', `This key cannot be copied: ${reason}`);
    this.log?.info({ dashboardSessionId: session.id, apiKeyId }, 'dashboard key copied');
    return this.vault().open(sealed!, apiKeyId);
  }

  /** Revokes a key of the session's workspace (and what it minted): 404 for another workspace's. */
  async revokeKey(session: DashboardSession, apiKeyId: string): Promise<ApiKeyRecord> {
    if (!canManageKeys(session.role)) throw new ApiError('forbidden', 'Only owners and admins can revoke keys');
    const key = (await this.listKeys(session.tenantId)).find((k) => k.id === apiKeyId);
    if (!key) throw new ApiError('not_found', `No API key ${apiKeyId} in this workspace`);
    const revoked = await this.keys.revoke(apiKeyId);
    // Nothing to copy any more: the kept value goes with the key's use.
    await this.sql`delete from dashboard_key_secrets where api_key_id = ${apiKeyId}`;
    this.log?.info({ dashboardSessionId: session.id, apiKeyId }, 'dashboard key revoked');
    return revoked!;
  }
}

/** Why a key's full value cannot be shown again, or null when it can. */
function notCopyable(k: ApiKeyRecord, kept: boolean): string | null {
  if (k.status !== 'active') return 'it is revoked';
  if (k.expiresAt && k.expiresAt.getTime() <= Date.now()) return 'it has expired';
  if (!kept) return 'only its hash is stored (it was not made in the dashboard): make a new key to replace it if lost';
  return null;
}
