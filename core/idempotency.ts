import { createHash } from 'node:crypto';
import type { Sql } from './platform/db/index.ts';
import { ApiError } from './platform/errors.ts';

export const IDEMPOTENCY_KEY_MAX = 180;
/** How long a stored answer is replayed. */
const ANSWER_TTL_SECONDS = 24 * 3600;
/** A claim left in flight by a crashed process can be taken over after this. */
const CLAIM_LOCK_SECONDS = 300;

/**
 * - `replay`: a repeat with the same body gets the stored answer (PUT clips, PUT loop).
 * - `reject`: any reuse is 409 (the turn stream cannot be replayed).
 */
type IdempotencyMode = 'replay' | 'reject';

export type Claim =
  | { kind: 'run'; release: (answer?: { status: number; body: unknown }) => Promise<void> }
  | { kind: 'replay'; status: number; body: unknown };

export interface ClaimInput {
  tenantId: string;
  /** The operation, e.g. "PUT /avatars/{avatarId}/clips" plus the resource id. */
  scope: string;
  key: string;
  /** Canonical request content; a different one under the same key is a conflict. */
  request: string;
  mode: IdempotencyMode;
}

function hashRequest(request: string): string {
  return createHash('sha256').update(request).digest('hex');
}

/**
 * Idempotency-Key records in PostgreSQL. Claiming is one atomic upsert, so of concurrent requests
 * with one key exactly one runs the work; the others see it in flight (409) or, once it is done,
 * get its stored answer.
 */
export class IdempotencyStore {
  constructor(private readonly sql: Sql) {}

  async claim(input: ClaimInput): Promise<Claim> {
    if (input.key.length === 0 || input.key.length > IDEMPOTENCY_KEY_MAX) {
      throw new ApiError('validation_error', `Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_MAX} characters`, {
        field: 'Idempotency-Key',
      });
    }
    const hash = hashRequest(input.request);
    const won = await this.sql<{ token: string }[]>`
      insert into idempotency_keys (tenant_id, scope, key, request_hash, state, locked_until, expires_at)
      values (${input.tenantId}, ${input.scope}, ${input.key}, ${hash}, 'in_flight',
              now() + make_interval(secs => ${CLAIM_LOCK_SECONDS}), now() + make_interval(secs => ${ANSWER_TTL_SECONDS}))
      on conflict (tenant_id, scope, key) do update set
        request_hash = excluded.request_hash, state = 'in_flight', response_status = null, response_body = null,
        locked_until = excluded.locked_until, created_at = now(), expires_at = excluded.expires_at
      where idempotency_keys.expires_at < now()
         or (idempotency_keys.state = 'in_flight' and idempotency_keys.locked_until < now()
             and idempotency_keys.request_hash = excluded.request_hash)
      returning created_at::text as token`;
    if (won.length === 1) {
      // The claim's token (created_at to the microsecond, as text: a Date parameter would drop the
      // microseconds). A release only touches this claim, never a later takeover of the key.
      const token = won[0]!.token;
      return { kind: 'run', release: (answer) => this.release(input, token, answer) };
    }
    const [row] = await this.sql<
      { request_hash: string; state: string; response_status: number | null; response_body: unknown }[]
    >`
      select request_hash, state, response_status, response_body from idempotency_keys
      where tenant_id = ${input.tenantId} and scope = ${input.scope} and key = ${input.key}`;
    if (!row) return this.claim(input); // expired and removed in between: try again
    if (input.mode === 'reject') {
      throw new ApiError(
        'idempotency_conflict',
        'This Idempotency-Key was already used: send a fresh key for a new request',
      );
    }
    if (row.request_hash !== hash) {
      throw new ApiError(
        'idempotency_conflict',
        'This Idempotency-Key was used with a different request body: use a fresh key',
      );
    }
    if (row.state === 'in_flight') {
      throw new ApiError(
        'idempotency_conflict',
        'A request with this Idempotency-Key is still in flight: wait for it, or use a fresh key',
      );
    }
    return { kind: 'replay', status: row.response_status ?? 200, body: row.response_body };
  }

  /** Stores the answer (4xx answers too: a replay must not run the work again), or frees the key after a failure. */
  private async release(input: ClaimInput, token: string, answer?: { status: number; body: unknown }): Promise<void> {
    if (!answer || answer.status >= 500) {
      await this.sql`delete from idempotency_keys
                     where tenant_id = ${input.tenantId} and scope = ${input.scope} and key = ${input.key}
                       and state = 'in_flight' and created_at = ${token}::text::timestamptz`;
      return;
    }
    await this.sql`
      update idempotency_keys set state = 'done', response_status = ${answer.status},
        response_body = ${this.sql.json((answer.body ?? null) as never)}
      where tenant_id = ${input.tenantId} and scope = ${input.scope} and key = ${input.key}
        and state = 'in_flight' and created_at = ${token}::text::timestamptz`;
  }

  /** Drops answers past their replay window. */
  async purgeExpired(): Promise<number> {
    return (await this.sql`delete from idempotency_keys where expires_at < now()`).count;
  }
}
