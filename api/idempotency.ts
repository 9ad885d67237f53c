import type { Context } from 'hono';
import type { AppEnv } from './context.ts';

/** An answer as the Idempotency-Key store keeps it. */
export interface StoredAnswer {
  status: number;
  body: unknown;
}

export interface IdempotentOperation<T> {
  /** The operation plus its resource, e.g. "PUT /avatars/{avatarId}/clips". */
  scope: string;
  /** The request's content (JSON-serialised as given): another one under the same key is 409 idempotency_conflict. */
  request: unknown;
  /**
   * What a repeat of a finished request gets, from its stored answer. Without it any reuse of a key
   * is 409 idempotency_conflict (a turn's stream cannot be replayed).
   */
  replay?: (stored: StoredAnswer) => T;
}

/**
 * Runs `work` once per Idempotency-Key (core/idempotency.ts holds the keys). Without the header it
 * just runs. With it, the key is claimed first: a repeat is replayed (or refused, see `replay`), a
 * request still in flight or with another body under the key is 409 idempotency_conflict. `work`
 * hands `settle` the answer to store once the request has succeeded; when it throws, the key is
 * freed (nothing was written: the same key may be retried).
 */
export async function withIdempotency<T>(
  c: Context<AppEnv>,
  operation: IdempotentOperation<T>,
  work: (settle: (answer: StoredAnswer) => Promise<void>) => Promise<T>,
): Promise<T> {
  const key = c.req.header('idempotency-key');
  if (key === undefined) return work(async () => {});
  const claim = await c.get('services').idempotency.claim({
    tenantId: c.get('principal').tenantId,
    scope: operation.scope,
    key,
    request: JSON.stringify(operation.request),
    mode: operation.replay ? 'replay' : 'reject',
  });
  if (claim.kind === 'replay') {
    // The store answers 'replay' only in replay mode, which needs `operation.replay`.
    return operation.replay!({ status: claim.status, body: claim.body });
  }
  try {
    return await work(claim.release);
  } catch (err) {
    await claim.release();
    throw err;
  }
}
