import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { expectApiError, freshDatabase } from '../test/helpers.ts';
import type { ApiError } from './platform/errors.ts';
import { IDEMPOTENCY_KEY_MAX, IdempotencyStore, type Claim, type ClaimInput } from './idempotency.ts';

const db = await freshDatabase();
afterAll(() => db.drop());
const store = new IdempotencyStore(db.sql);

/** A fresh tenant, scope and key per test, so tests never see each other's records. */
function input(over: Partial<ClaimInput> = {}): ClaimInput {
  return {
    tenantId: `ten_${randomUUID()}`,
    scope: 'PUT /avatars/ava_1/clips',
    key: `key-${randomUUID()}`,
    request: JSON.stringify({ expectedRevision: 1, clips: { a: { source: { assetId: 'ast_1' } } } }),
    mode: 'replay',
    ...over,
  };
}

function expectRun(c: Claim): Extract<Claim, { kind: 'run' }> {
  expect(c.kind).toBe('run');
  return c as Extract<Claim, { kind: 'run' }>;
}

describe('Idempotency-Key claims', () => {
  it('the first request with a key runs the work', async () => {
    const c = await store.claim(input());
    expectRun(c);
  });

  it('a replay with the same request gets the stored status and body and does not run again', async () => {
    const i = input();
    const first = expectRun(await store.claim(i));
    await first.release({ status: 201, body: { plan: { kept: ['a'], queued: [] }, revision: 2 } });

    for (let n = 0; n < 3; n++) {
      const again = await store.claim({ ...i });
      expect(again).toEqual({ kind: 'replay', status: 201, body: { plan: { kept: ['a'], queued: [] }, revision: 2 } });
    }
  });

  it('a 4xx answer is stored and replayed too', async () => {
    const i = input();
    await expectRun(await store.claim(i)).release({ status: 409, body: { code: 'revision_conflict' } });
    expect(await store.claim(i)).toEqual({ kind: 'replay', status: 409, body: { code: 'revision_conflict' } });
  });

  it('reusing a key with a different request is 409 idempotency_conflict', async () => {
    const i = input();
    await expectRun(await store.claim(i)).release({ status: 200, body: { ok: true } });
    const e = await expectApiError(store.claim({ ...i, request: '{"other":true}' }), 'idempotency_conflict', 409);
    expect(e.message).toMatch(/different request/i);
    // The stored answer is untouched by the refused reuse.
    expect(await store.claim(i)).toEqual({ kind: 'replay', status: 200, body: { ok: true } });
  });

  it('a repeat while the first request is still in flight is 409', async () => {
    const i = input();
    expectRun(await store.claim(i));
    const e = await expectApiError(store.claim(i), 'idempotency_conflict', 409);
    expect(e.message).toMatch(/in flight/i);
  });

  it('of many concurrent requests with one key exactly one runs; the rest are 409', async () => {
    const i = input();
    const results = await Promise.allSettled(Array.from({ length: 25 }, () => store.claim({ ...i })));
    const runs = results.filter((r) => r.status === 'fulfilled' && r.value.kind === 'run');
    expect(runs).toHaveLength(1);
    for (const r of results) {
      if (r.status === 'rejected') expect((r.reason as ApiError).code).toBe('idempotency_conflict');
    }
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(24);

    // Once it is done, concurrent repeats all get the stored answer and none runs.
    const winner = runs[0] as PromiseFulfilledResult<Claim>;
    await expectRun(winner.value).release({ status: 200, body: { n: 1 } });
    const replays = await Promise.all(Array.from({ length: 10 }, () => store.claim({ ...i })));
    expect(replays.every((c) => c.kind === 'replay')).toBe(true);
  });

  it('a 5xx answer frees the key, so a retry runs the work', async () => {
    const i = input();
    await expectRun(await store.claim(i)).release({ status: 503, body: { code: 'capacity_unavailable' } });
    const retry = expectRun(await store.claim(i));
    await retry.release({ status: 200, body: { done: true } });
    expect(await store.claim(i)).toEqual({ kind: 'replay', status: 200, body: { done: true } });
  });

  it('a failure with no answer (thrown error) frees the key, so a retry runs the work', async () => {
    const i = input();
    await expectRun(await store.claim(i)).release();
    expectRun(await store.claim(i));
  });

  it('a freed key may be reused with a different request', async () => {
    const i = input();
    await expectRun(await store.claim(i)).release({ status: 500, body: null });
    expectRun(await store.claim({ ...i, request: '{"changed":1}' }));
  });

  it('mode reject: any reuse of the key is 409, even with the same request', async () => {
    const i = input({ mode: 'reject', scope: 'POST /realtime/turn' });
    const first = expectRun(await store.claim(i));
    await expectApiError(store.claim(i), 'idempotency_conflict', 409);
    await first.release({ status: 200, body: null });
    await expectApiError(store.claim(i), 'idempotency_conflict', 409);
    await expectApiError(store.claim({ ...i, request: 'other' }), 'idempotency_conflict', 409);
  });

  it('a key longer than 180 characters is 422 naming Idempotency-Key; 180 is accepted', async () => {
    expect(IDEMPOTENCY_KEY_MAX).toBe(180);
    const e = await expectApiError(store.claim(input({ key: 'k'.repeat(181) })), 'validation_error', 422);
    expect(e.message).toContain('Idempotency-Key');
    expect(e.extra).toMatchObject({ field: 'Idempotency-Key' });
    expectRun(await store.claim(input({ key: 'k'.repeat(180) })));
  });

  it('an empty key is 422 naming Idempotency-Key', async () => {
    const e = await expectApiError(store.claim(input({ key: '' })), 'validation_error', 422);
    expect(e.message).toContain('Idempotency-Key');
  });

  it('keys are per tenant: the same key in another tenant runs', async () => {
    const i = input();
    expectRun(await store.claim(i));
    expectRun(await store.claim({ ...i, tenantId: `ten_${randomUUID()}` }));
    expectRun(await store.claim({ ...i, tenantId: `ten_${randomUUID()}`, request: 'a different body' }));
  });

  it('keys are per scope: the same key on another operation runs', async () => {
    const i = input();
    await expectRun(await store.claim(i)).release({ status: 200, body: { first: true } });
    expectRun(await store.claim({ ...i, scope: 'PUT /avatars/ava_2/clips' }));
    expectRun(await store.claim({ ...i, scope: 'PUT /avatars/ava_1/loop' }));
  });
});

describe('Idempotency-Key records over time', () => {
  const where = (i: ClaimInput) => db.sql`tenant_id = ${i.tenantId} and scope = ${i.scope} and key = ${i.key}`;

  it('a stored answer past its replay window is dropped and the key runs again', async () => {
    const i = input();
    await expectRun(await store.claim(i)).release({ status: 200, body: { old: true } });
    await db.sql`update idempotency_keys set expires_at = now() - interval '1 second' where ${where(i)}`;
    expectRun(await store.claim({ ...i, request: 'new body' }));
  });

  it('purgeExpired removes answers past their window and keeps live ones', async () => {
    const old = input();
    const live = input();
    await expectRun(await store.claim(old)).release({ status: 200, body: 1 });
    await expectRun(await store.claim(live)).release({ status: 200, body: 2 });
    await db.sql`update idempotency_keys set expires_at = now() - interval '1 second' where ${where(old)}`;
    expect(await store.purgeExpired()).toBeGreaterThanOrEqual(1);
    const rows = await db.sql`select key from idempotency_keys where key = any(${[old.key, live.key]})`;
    expect(rows.map((r) => r.key as string)).toEqual([live.key]);
  });

  it('a claim left in flight by a crashed process is taken over by the same request, not by a different one', async () => {
    const i = input();
    expectRun(await store.claim(i));
    await db.sql`update idempotency_keys set locked_until = now() - interval '1 second' where ${where(i)}`;
    await expectApiError(store.claim({ ...i, request: 'different' }), 'idempotency_conflict', 409);
    expectRun(await store.claim(i));
  });

  it('a stale claim releasing late neither frees nor overwrites the claim that took over', async () => {
    const i = input();
    const stale = expectRun(await store.claim(i));
    await db.sql`update idempotency_keys set locked_until = now() - interval '1 second' where ${where(i)}`;
    const current = expectRun(await store.claim(i));

    await stale.release({ status: 502, body: null });
    await expectApiError(store.claim(i), 'idempotency_conflict', 409); // still in flight: not freed
    await stale.release({ status: 200, body: { from: 'stale' } });
    await expectApiError(store.claim(i), 'idempotency_conflict', 409); // still in flight: not overwritten

    await current.release({ status: 200, body: { from: 'current' } });
    expect(await store.claim(i)).toEqual({ kind: 'replay', status: 200, body: { from: 'current' } });
  });
});
