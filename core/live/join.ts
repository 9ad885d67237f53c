/**
 * Join tokens: what a grant carries instead of the LiveKit token when its workspace limits calls to
 * allowed origins. A page redeems one (once, from an allowed `Origin`) for the LiveKit token. The
 * token is kept only as its SHA-256: a copy of the database joins no call.
 */
import { randomBytes } from 'node:crypto';
import { sha256 } from '../auth/keys.ts';
import type { Sql, Tx } from '../platform/db/index.ts';
import { ApiError } from '../platform/errors.ts';
import { originProblem } from '../tenants.ts';

/**
 * The origin a request's `Origin` header names, in the form allowed origins are kept (scheme and
 * host in any case, as the setting checks them); undefined when it names none.
 */
function requestOrigin(header: string | undefined): string | undefined {
  const origin = header?.toLowerCase();
  return origin !== undefined && originProblem(origin) === undefined ? origin : undefined;
}

/** What a redeemed token joins: the call's room, as the user. */
export interface JoinTarget {
  sessionId: string;
  roomName: string;
  userIdentity: string;
  avatarIdentity: string;
}

/** A new join token for a call, stored (hashed) in the mint's transaction; valid `ttlSeconds`. */
export async function issueJoinToken(
  tx: Tx,
  o: { tenantId: string; sessionId: string; ttlSeconds: number },
): Promise<string> {
  // 256 random bits: guessing one is hopeless, so a refusal may say which check failed.
  const token = `sjt_${randomBytes(32).toString('base64url')}`;
  await tx`
    insert into live_join_tokens (token_hash, session_id, tenant_id, expires_at)
    values (${sha256(token)}, ${o.sessionId}, ${o.tenantId}, now() + make_interval(secs => ${o.ttlSeconds}))`;
  return token;
}

interface TokenState {
  used: boolean;
  expired: boolean;
  allowed: boolean;
  tenant_status: string;
  state: string;
}

/**
 * Redeems a join token from a page of the request's `Origin` (compared as allowed origins are kept):
 * one UPDATE marks it used only while unused, unexpired, its call not over and the origin allowed
 * by its workspace now, so two redemptions at once cannot both succeed, and a workspace that drops
 * an origin stops tokens minted earlier from being used there. Refusals: 403 origin_not_allowed
 * (no Origin, or one not allowed), 404 join_token_not_found, 410 join_token_used, 410
 * join_token_expired (expired, or the call has ended), 403 tenant_not_active.
 */
export async function redeemJoinToken(sql: Sql, token: string, originHeader: string | undefined): Promise<JoinTarget> {
  if (!originHeader) {
    throw new ApiError(
      'origin_not_allowed',
      'Missing Origin header: a join token is redeemed by a web page of an origin its workspace allows',
      { field: 'Origin' },
    );
  }
  const origin = requestOrigin(originHeader);
  if (!origin) {
    throw new ApiError(
      'origin_not_allowed',
      'The Origin header names no http or https origin: no workspace allows it',
      {
        field: 'Origin',
      },
    );
  }
  const hash = sha256(token);
  // An empty list is no limit (the workspace dropped its limit after this mint).
  const [row] = await sql<{ session_id: string; room_name: string; user_identity: string; avatar_identity: string }[]>`
    update live_join_tokens j set used_at = now()
    from tenants t, live_sessions s
    where j.token_hash = ${hash} and j.used_at is null and j.expires_at > now()
      and t.id = j.tenant_id and t.status = 'active'
      and (cardinality(t.allowed_origins) = 0 or ${origin} = any(t.allowed_origins))
      and s.id = j.session_id and s.state <> 'ended' and s.user_identity is not null
    returning s.id as session_id, s.room_name, s.user_identity, s.avatar_identity`;
  if (row) {
    return {
      sessionId: row.session_id,
      roomName: row.room_name,
      userIdentity: row.user_identity,
      avatarIdentity: row.avatar_identity,
    };
  }
  throw await whyNot(sql, hash, origin);
}

/** The refusal of a token the redeeming UPDATE did not take, in the order the checks are documented. */
async function whyNot(sql: Sql, hash: Buffer, origin: string): Promise<ApiError> {
  const [s] = await sql<TokenState[]>`
    select j.used_at is not null as used, j.expires_at <= now() as expired,
           (cardinality(t.allowed_origins) = 0 or ${origin} = any(t.allowed_origins)) as allowed,
           t.status as tenant_status, s.state
    from live_join_tokens j join tenants t on t.id = j.tenant_id join live_sessions s on s.id = j.session_id
    where j.token_hash = ${hash}`;
  if (!s) {
    return new ApiError('join_token_not_found', 'Unknown join token: it was never issued, or has been purged', {
      field: 'join_token',
    });
  }
  if (!s.allowed) {
    return new ApiError(
      'origin_not_allowed',
      `Origin ${origin} is not allowed to join this workspace's calls: add it to the workspace's allowedOrigins (PATCH /api/v1/workspace)`,
      { field: 'Origin' },
    );
  }
  if (s.tenant_status !== 'active') return new ApiError('tenant_not_active', 'Tenant is not active');
  if (s.used) {
    return new ApiError('join_token_used', 'This join token was used already: mint a new session', {
      field: 'join_token',
    });
  }
  return new ApiError(
    'join_token_expired',
    s.expired
      ? 'This join token has expired: mint a new session'
      : 'The call of this join token has ended: mint a new session',
    { field: 'join_token' },
  );
}

/** Drops join tokens past their expiry (the janitor): a used or expired token is never redeemed again. */
export async function purgeExpiredJoinTokens(sql: Sql): Promise<number> {
  return (await sql`delete from live_join_tokens where expires_at < now()`).count;
}
