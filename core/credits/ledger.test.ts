import fc from 'fast-check';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { expectApiError, testServices, waitFor } from '../../test/helpers.ts';
import { checkLedgerInvariants } from '../../test/ledger-invariants.ts';
import { ApiError } from '../platform/errors.ts';
import { CreditLedger, MICROS_PER_SECOND, spendRoom } from './ledger.ts';

const s = await testServices();
afterAll(() => s.close());
const ledger = s.ledger;
const SEC = MICROS_PER_SECOND;

async function newTenant(seconds = 0): Promise<string> {
  const t = await s.tenants.create('ledger test');
  if (seconds > 0) await ledger.grant(t.id, seconds * SEC);
  return t.id;
}

async function newKey(
  tenantId: string,
  spendLimitCreditMicros: number | null = null,
  parentId: string | null = null,
): Promise<string> {
  const { record } = await s.keys.create({ tenantId, name: 'k', scopes: ['*'], spendLimitCreditMicros, parentId });
  return record.id;
}

async function keyRow(id: string) {
  const [k] = await s.sql<{ spent_credit_micros: number; reserved_credit_micros: number }[]>`
    select spent_credit_micros, reserved_credit_micros from api_keys where id = ${id}`;
  return k!;
}

async function reservationRow(id: string) {
  const [r] = await s.sql<{ status: string; progress_credit_micros: number; settled_credit_micros: number | null }[]>`
    select status, progress_credit_micros, settled_credit_micros from credit_reservations where id = ${id}`;
  return r!;
}

const reserve = (tenantId: string, seconds: number, extra: { apiKeyId?: string; ttlSeconds?: number } = {}) =>
  ledger.reserve({
    tenantId,
    apiKeyId: extra.apiKeyId ?? null,
    amountCreditMicros: seconds * SEC,
    purpose: 'turn',
    ttlSeconds: extra.ttlSeconds ?? 60,
  });

describe('credit wallet: grant, reserve, settle', () => {
  it('a grant adds to the balance and to lifetime granted, and writes a ledger row', async () => {
    const t = await newTenant();
    const b = await ledger.grant(t, 7 * SEC, 'welcome');
    expect(b).toMatchObject({
      tenantId: t,
      balanceCreditMicros: 7 * SEC,
      reservedCreditMicros: 0,
      availableCreditMicros: 7 * SEC,
      lifetimeGrantedCreditMicros: 7 * SEC,
      lifetimeUsedCreditMicros: 0,
    });
    const rows = await s.sql`select kind, amount_credit_micros, note from credit_ledger where tenant_id = ${t}`;
    expect(rows).toEqual([{ kind: 'grant', amount_credit_micros: 7 * SEC, note: 'welcome' }]);
  });

  it('refuses a grant of zero or a fractional amount', async () => {
    const t = await newTenant();
    await expect(ledger.grant(t, 0)).rejects.toThrow(RangeError);
    await expect(ledger.grant(t, 1.5)).rejects.toThrow(RangeError);
    expect((await ledger.balance(t)).balanceCreditMicros).toBe(0);
  });

  it('a reservation holds credits: available drops, the balance does not', async () => {
    const t = await newTenant(10);
    const r = await reserve(t, 4);
    expect(r).toMatchObject({ tenantId: t, amountCreditMicros: 4 * SEC, status: 'open', settledCreditMicros: null });
    const b = await ledger.balance(t);
    expect(b.balanceCreditMicros).toBe(10 * SEC);
    expect(b.reservedCreditMicros).toBe(4 * SEC);
    expect(b.availableCreditMicros).toBe(6 * SEC);
  });

  it('settling charges the actual usage and releases the rest of the reservation', async () => {
    const t = await newTenant(10);
    const r = await reserve(t, 5);
    expect((await ledger.settle(r.id, 3 * SEC)).chargedCreditMicros).toBe(3 * SEC);
    const b = await ledger.balance(t);
    expect(b).toMatchObject({
      balanceCreditMicros: 7 * SEC,
      reservedCreditMicros: 0,
      availableCreditMicros: 7 * SEC,
      lifetimeUsedCreditMicros: 3 * SEC,
    });
    expect(await ledger.getReservation(r.id)).toMatchObject({ status: 'settled', settledCreditMicros: 3 * SEC });
    const usage =
      await s.sql`select amount_credit_micros, reservation_id from credit_ledger where tenant_id = ${t} and kind = 'usage'`;
    expect(usage).toEqual([{ amount_credit_micros: -3 * SEC, reservation_id: r.id }]);
  });

  it('a settlement never exceeds the reservation, however much usage is claimed', async () => {
    const t = await newTenant(10);
    const r = await reserve(t, 2);
    expect((await ledger.settle(r.id, 9 * SEC)).chargedCreditMicros).toBe(2 * SEC);
    const b = await ledger.balance(t);
    expect(b.balanceCreditMicros).toBe(8 * SEC);
    expect(b.reservedCreditMicros).toBe(0);
    expect((await reservationRow(r.id)).settled_credit_micros).toBe(2 * SEC);
  });

  it('settling at zero releases the whole reservation and writes no usage row', async () => {
    const t = await newTenant(3);
    const r = await reserve(t, 3);
    expect((await ledger.settle(r.id, 0)).chargedCreditMicros).toBe(0);
    expect(await ledger.balance(t)).toMatchObject({ balanceCreditMicros: 3 * SEC, reservedCreditMicros: 0 });
    const [n] = await s.sql<
      { n: number }[]
    >`select count(*)::int as n from credit_ledger where tenant_id = ${t} and kind = 'usage'`;
    expect(n!.n).toBe(0);
  });

  it('settling twice charges once and returns the first charge', async () => {
    const t = await newTenant(10);
    const r = await reserve(t, 5);
    await ledger.settle(r.id, 2 * SEC);
    expect((await ledger.settle(r.id, 4 * SEC)).chargedCreditMicros).toBe(2 * SEC);
    expect(await ledger.balance(t)).toMatchObject({ balanceCreditMicros: 8 * SEC, reservedCreditMicros: 0 });
  });

  it('concurrent settlements of one reservation charge it exactly once', async () => {
    const t = await newTenant(10);
    const r = await reserve(t, 5);
    const results = await Promise.all(Array.from({ length: 8 }, () => ledger.settle(r.id, 3 * SEC)));
    expect(results.every((x) => x.chargedCreditMicros === 3 * SEC)).toBe(true);
    expect(await ledger.balance(t)).toMatchObject({
      balanceCreditMicros: 7 * SEC,
      reservedCreditMicros: 0,
      lifetimeUsedCreditMicros: 3 * SEC,
    });
  });

  it('settling an unknown reservation is 404 not_found', async () => {
    await expectApiError(ledger.settle('rsv_doesnotexist', 1), 'not_found', 404);
  });
});

describe('credit wallet: refusals', () => {
  it('is 402 insufficient_credits when available credits are below the amount, counting open reservations', async () => {
    const t = await newTenant(10);
    await reserve(t, 7);
    const err = await expectApiError(reserve(t, 4), 'insufficient_credits', 402);
    expect(err.extra).toMatchObject({ requiredCreditMicros: 4 * SEC, availableCreditMicros: 3 * SEC });
    // Exactly the available amount is fine.
    await reserve(t, 3);
    await expectApiError(
      ledger.reserve({ tenantId: t, amountCreditMicros: 1, purpose: 'turn', ttlSeconds: 60 }),
      'insufficient_credits',
      402,
    );
    expect(await ledger.balance(t)).toMatchObject({ balanceCreditMicros: 10 * SEC, reservedCreditMicros: 10 * SEC });
  });

  it('is 402 insufficient_credits for a tenant with no credits at all', async () => {
    const t = await newTenant();
    await expectApiError(reserve(t, 1), 'insufficient_credits', 402);
  });

  it('a key spend limit counts what the key spent plus its open reservations (402 spend_limit_exceeded)', async () => {
    const t = await newTenant(100);
    const key = await newKey(t, 5 * SEC);
    const r1 = await reserve(t, 3, { apiKeyId: key });
    expect(await keyRow(key)).toEqual({ spent_credit_micros: 0, reserved_credit_micros: 3 * SEC });
    // 3 reserved + 3 more would be 6 > 5.
    await expectApiError(reserve(t, 3, { apiKeyId: key }), 'spend_limit_exceeded', 402);

    await ledger.settle(r1.id, 2 * SEC);
    expect(await keyRow(key)).toEqual({ spent_credit_micros: 2 * SEC, reserved_credit_micros: 0 });
    // 2 spent + 3 = 5: exactly the limit is allowed.
    await reserve(t, 3, { apiKeyId: key });
    await expectApiError(
      ledger.reserve({ tenantId: t, apiKeyId: key, amountCreditMicros: 1, purpose: 'turn', ttlSeconds: 60 }),
      'spend_limit_exceeded',
      402,
    );
    // The refusals held nothing.
    expect(await keyRow(key)).toEqual({ spent_credit_micros: 2 * SEC, reserved_credit_micros: 3 * SEC });
    expect((await ledger.balance(t)).reservedCreditMicros).toBe(3 * SEC);
  });

  it('the spend limit is per key: another key of the same tenant still spends', async () => {
    const t = await newTenant(100);
    const limited = await newKey(t, 1 * SEC);
    const other = await newKey(t, null);
    await reserve(t, 1, { apiKeyId: limited });
    await expectApiError(reserve(t, 1, { apiKeyId: limited }), 'spend_limit_exceeded', 402);
    await reserve(t, 50, { apiKeyId: other });
    expect(await keyRow(other)).toEqual({ spent_credit_micros: 0, reserved_credit_micros: 50 * SEC });
  });

  it('concurrent reservations never overdraw the wallet or the key limit', async () => {
    const t = await newTenant(10);
    const key = await newKey(t, 6 * SEC);
    const results = await Promise.allSettled(Array.from({ length: 12 }, () => reserve(t, 1, { apiKeyId: key })));
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    expect(ok).toBe(6);
    for (const r of results) {
      if (r.status === 'rejected') expect((r.reason as ApiError).code).toBe('spend_limit_exceeded');
    }
    expect(await keyRow(key)).toEqual({ spent_credit_micros: 0, reserved_credit_micros: 6 * SEC });
    expect((await ledger.balance(t)).reservedCreditMicros).toBe(6 * SEC);
  });
});

describe('credit wallet: keys minted under a spend-limited key', () => {
  it("security: a child's reservation and its settlement count against its parent and grandparent", async () => {
    const t = await newTenant(100);
    const root = await newKey(t, 10 * SEC);
    const parent = await newKey(t, 8 * SEC, root);
    const child = await newKey(t, 5 * SEC, parent);
    const r = await reserve(t, 4, { apiKeyId: child });
    for (const k of [root, parent, child])
      expect(await keyRow(k)).toEqual({ spent_credit_micros: 0, reserved_credit_micros: 4 * SEC });
    await ledger.settle(r.id, 3 * SEC);
    for (const k of [root, parent, child])
      expect(await keyRow(k)).toEqual({ spent_credit_micros: 3 * SEC, reserved_credit_micros: 0 });
    // The parent's own spend counts against the root, not against the child below it.
    await reserve(t, 1, { apiKeyId: parent });
    expect(await keyRow(child)).toEqual({ spent_credit_micros: 3 * SEC, reserved_credit_micros: 0 });
    expect(await keyRow(root)).toEqual({ spent_credit_micros: 3 * SEC, reserved_credit_micros: 1 * SEC });
    await checkLedgerInvariants(s.sql, [t], [root, parent, child]);
  });

  it('error: 402 spend_limit_exceeded names the ancestor whose limit refuses, and holds nothing', async () => {
    const t = await newTenant(100);
    const parent = await newKey(t, 3 * SEC);
    const child = await newKey(t, 3 * SEC, parent);
    await reserve(t, 2, { apiKeyId: parent });
    // The child's own limit has room for 2 s; its parent's has 1 s left.
    const err = await expectApiError(reserve(t, 2, { apiKeyId: child }), 'spend_limit_exceeded', 402);
    expect(err.extra).toMatchObject({ spendLimitKeyId: parent, spendLimitCreditMicros: 3 * SEC });
    expect(err.message).toContain(parent);
    expect(await keyRow(child)).toEqual({ spent_credit_micros: 0, reserved_credit_micros: 0 });
    expect((await ledger.balance(t)).reservedCreditMicros).toBe(2 * SEC);
    // The check before work starts (turns' prepare) sees the parent's limit too.
    await reserve(t, 1, { apiKeyId: parent });
    const used = await expectApiError(ledger.assertSpendable(t, child), 'spend_limit_exceeded', 402);
    expect(used.extra).toMatchObject({ spendLimitKeyId: parent });
    // And its own limit, named as its own.
    const own = await expectApiError(
      reserve(t, 4, { apiKeyId: await newKey(t, 3 * SEC) }),
      'spend_limit_exceeded',
      402,
    );
    expect(own.message).toMatch(/^This API key's spend limit/);
  });

  it("security: a parent and children minted with its limit, spending in parallel, never pass the parent's limit", async () => {
    // The probe of issue 25: a 3 s key minted three 3 s children; the four together spent 8.6 s.
    const t = await newTenant(100);
    const parent = await newKey(t, 3 * SEC);
    const children = [
      await newKey(t, 3 * SEC, parent),
      await newKey(t, 3 * SEC, parent),
      await newKey(t, 3 * SEC, parent),
    ];
    const payers = [parent, ...children];
    const tenth = SEC / 10;
    const attempts = payers.flatMap((k) => Array.from({ length: 12 }, () => k));
    const results = await Promise.allSettled(
      attempts.map(async (k) => {
        const r = await ledger.reserve({
          tenantId: t,
          apiKeyId: k,
          amountCreditMicros: 3 * tenth,
          purpose: 'turn',
          ttlSeconds: 60,
        });
        await ledger.settle(r.id, 3 * tenth);
      }),
    );
    for (const r of results)
      if (r.status === 'rejected') expect((r.reason as ApiError).code).toBe('spend_limit_exceeded');
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(10);
    expect((await ledger.balance(t)).lifetimeUsedCreditMicros).toBe(3 * SEC);
    expect(await keyRow(parent)).toEqual({ spent_credit_micros: 3 * SEC, reserved_credit_micros: 0 });
    await checkLedgerInvariants(s.sql, [t], payers);
  });

  it('spendRoom is the least room along the chain, and names its key', async () => {
    const t = await newTenant(100);
    const parent = await newKey(t, 3 * SEC);
    const child = await newKey(t, 2 * SEC, parent);
    expect(await spendRoom(s.sql, child)).toEqual({
      roomCreditMicros: 2 * SEC,
      limitingKey: { id: child, spendLimitCreditMicros: 2 * SEC, self: true },
    });
    await reserve(t, 2, { apiKeyId: parent });
    expect(await spendRoom(s.sql, child)).toEqual({
      roomCreditMicros: 1 * SEC,
      limitingKey: { id: parent, spendLimitCreditMicros: 3 * SEC, self: false },
    });
    expect(await spendRoom(s.sql, await newKey(t))).toEqual({ roomCreditMicros: null, limitingKey: null });
  });
});

describe('credit wallet: the database refuses impossible states', () => {
  it('a negative balance, reserved above balance, or a settlement above its reservation violate CHECK constraints', async () => {
    const t = await newTenant(5);
    const r = await reserve(t, 2);
    await expect(s.sql`update credit_wallets set balance_credit_micros = -1 where tenant_id = ${t}`).rejects.toThrow(
      /check constraint/,
    );
    await expect(
      s.sql`update credit_wallets set reserved_credit_micros = balance_credit_micros + 1 where tenant_id = ${t}`,
    ).rejects.toThrow(/check constraint/);
    await expect(
      s.sql`update credit_reservations set settled_credit_micros = amount_credit_micros + 1 where id = ${r.id}`,
    ).rejects.toThrow(/check constraint/);
    expect(await ledger.balance(t)).toMatchObject({ balanceCreditMicros: 5 * SEC, reservedCreditMicros: 2 * SEC });
  });
});

describe('credit wallet: progress and expiry of crashed holders', () => {
  it('reported progress is capped at the reservation and never goes backwards', async () => {
    const t = await newTenant(10);
    const r = await reserve(t, 2);
    await ledger.reportProgress(r.id, 1 * SEC);
    expect((await reservationRow(r.id)).progress_credit_micros).toBe(1 * SEC);
    await ledger.reportProgress(r.id, SEC / 2);
    expect((await reservationRow(r.id)).progress_credit_micros).toBe(1 * SEC);
    await ledger.reportProgress(r.id, 50 * SEC);
    expect((await reservationRow(r.id)).progress_credit_micros).toBe(2 * SEC);
  });

  it('progress reported on a settled reservation changes nothing', async () => {
    const t = await newTenant(10);
    const r = await reserve(t, 2);
    await ledger.settle(r.id, SEC);
    await ledger.reportProgress(r.id, 2 * SEC);
    expect(await reservationRow(r.id)).toMatchObject({
      status: 'settled',
      progress_credit_micros: 0,
      settled_credit_micros: SEC,
    });
  });

  it('expireDue settles an expired reservation at its reported progress and leaves unexpired ones alone', async () => {
    const t = await newTenant(10);
    const key = await newKey(t, null);
    const due = await reserve(t, 3, { apiKeyId: key, ttlSeconds: 0.2 });
    const alive = await reserve(t, 2, { ttlSeconds: 60 });
    await ledger.reportProgress(due.id, 1.25 * SEC);
    await ledger.reportProgress(alive.id, 1 * SEC);
    await waitFor('the short reservation to pass its expiry on the database clock', async () =>
      (await s.sql`select 1 from credit_reservations where id = ${due.id} and expires_at <= now()`).length > 0
        ? true
        : undefined,
    );

    const expired = await ledger.expireDue();
    expect(expired).toContain(due.id);
    expect(expired).not.toContain(alive.id);
    expect(await reservationRow(due.id)).toMatchObject({ status: 'expired', settled_credit_micros: 1.25 * SEC });
    expect(await reservationRow(alive.id)).toMatchObject({ status: 'open', settled_credit_micros: null });
    expect(await ledger.balance(t)).toMatchObject({
      balanceCreditMicros: 10 * SEC - 1.25 * SEC,
      reservedCreditMicros: 2 * SEC,
      lifetimeUsedCreditMicros: 1.25 * SEC,
    });
    expect(await keyRow(key)).toEqual({ spent_credit_micros: 1.25 * SEC, reserved_credit_micros: 0 });

    // A second pass finds nothing more of this tenant, and the late holder's settle gets the janitor's charge.
    expect(await ledger.expireDue()).not.toContain(due.id);
    expect((await ledger.settle(due.id, 3 * SEC)).chargedCreditMicros).toBe(1.25 * SEC);
    expect((await ledger.balance(t)).balanceCreditMicros).toBe(10 * SEC - 1.25 * SEC);
  });

  it('an expired reservation with no progress is released at no charge', async () => {
    const t = await newTenant(4);
    const r = await reserve(t, 4);
    await s.sql`update credit_reservations set expires_at = now() - interval '1 second' where id = ${r.id}`;
    expect(await ledger.expireDue()).toContain(r.id);
    expect(await reservationRow(r.id)).toMatchObject({ status: 'expired', settled_credit_micros: 0 });
    expect(await ledger.balance(t)).toMatchObject({ balanceCreditMicros: 4 * SEC, reservedCreditMicros: 0 });
  });

  it('reporting progress with an extension keeps the holder alive past its original expiry', async () => {
    const t = await newTenant(4);
    const r = await reserve(t, 4, { ttlSeconds: 0.2 });
    await ledger.reportProgress(r.id, SEC, 60);
    await new Promise((res) => setTimeout(res, 300));
    expect(await ledger.expireDue()).not.toContain(r.id);
    expect((await reservationRow(r.id)).status).toBe('open');
  });

  it('decides what is due by the database clock, even when this process runs an hour behind', async () => {
    const t = await newTenant(10);
    const r = await reserve(t, 2);
    await ledger.reportProgress(r.id, SEC);
    await s.sql`update credit_reservations set expires_at = now() - interval '1 second' where id = ${r.id}`;
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() - 3_600_000);
      expect(await ledger.expireDue()).toContain(r.id);
    } finally {
      vi.useRealTimers();
    }
    expect(await reservationRow(r.id)).toMatchObject({ status: 'expired', settled_credit_micros: SEC });
  });

  it('two janitors expiring at once settle each reservation once', async () => {
    const t = await newTenant(10);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await reserve(t, 2, { ttlSeconds: 0 });
      await ledger.reportProgress(r.id, SEC);
      ids.push(r.id);
    }
    const other = new CreditLedger(s.sql);
    const [a, b] = await Promise.all([ledger.expireDue(), other.expireDue()]);
    const mine = [...a, ...b].filter((id) => ids.includes(id));
    expect(mine.sort()).toEqual([...ids].sort());
    expect(await ledger.balance(t)).toMatchObject({ balanceCreditMicros: 6 * SEC, reservedCreditMicros: 0 });
  });
});

// ---------------------------------------------------------------------------------------------
// Property: random concurrent operations keep every ledger invariant.

type Op =
  | { op: 'grant'; tenant: number; units: number }
  | { op: 'reserve'; tenant: number; key: number; units: number; expiresNow: boolean }
  | { op: 'settle'; ref: number; units: number }
  | { op: 'progress'; ref: number; units: number }
  | { op: 'expire' };

const UNIT = 1000; // credit micros per generated unit

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('grant' as const),
      tenant: fc.nat(1),
      units: fc.integer({ min: 1, max: 40 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('reserve' as const),
      tenant: fc.nat(1),
      // 0: no key; 1: the tenant's unlimited key; 2: the tenant's spend-limited key; 3: a key minted under 2
      key: fc.nat(3),
      units: fc.integer({ min: 1, max: 30 }),
      expiresNow: fc.boolean(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('settle' as const),
      ref: fc.nat(50),
      units: fc.integer({ min: 0, max: 40 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('progress' as const),
      ref: fc.nat(50),
      units: fc.integer({ min: 0, max: 40 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('expire' as const) }) },
);

const EXPECTED_REFUSALS: ReadonlySet<string> = new Set(['insufficient_credits', 'spend_limit_exceeded']);

const checkInvariants = (tenants: string[], keys: string[]) => checkLedgerInvariants(s.sql, tenants, keys);

describe('credit wallet invariants under concurrent random operations', () => {
  it('keeps balance >= 0, ledger = balance, reserved = open reservations, settlement <= reservation, key totals exact', async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(opArb, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 0, max: 60 }),
        async (batches, initialUnits) => {
          runs++;
          const tenants = [await newTenant(), await newTenant()];
          const keys: string[][] = [];
          for (const t of tenants) {
            if (initialUnits > 0) await ledger.grant(t, initialUnits * UNIT);
            const limited = await newKey(t, 25 * UNIT);
            keys.push([await newKey(t, null), limited, await newKey(t, 15 * UNIT, limited)]);
          }
          const reservations: { id: string; amount: number }[] = [];
          const unexpected: unknown[] = [];

          const run = async (o: Op): Promise<void> => {
            switch (o.op) {
              case 'grant':
                await ledger.grant(tenants[o.tenant]!, o.units * UNIT);
                return;
              case 'reserve': {
                const r = await ledger.reserve({
                  tenantId: tenants[o.tenant]!,
                  apiKeyId: o.key === 0 ? null : keys[o.tenant]![o.key - 1]!,
                  amountCreditMicros: o.units * UNIT,
                  purpose: 'turn',
                  ttlSeconds: o.expiresNow ? 0 : 600,
                });
                reservations.push({ id: r.id, amount: r.amountCreditMicros });
                return;
              }
              case 'settle': {
                const r = reservations[o.ref % Math.max(1, reservations.length)];
                if (!r) return;
                const { chargedCreditMicros } = await ledger.settle(r.id, o.units * UNIT);
                expect(chargedCreditMicros).toBeLessThanOrEqual(r.amount);
                expect(chargedCreditMicros).toBeGreaterThanOrEqual(0);
                return;
              }
              case 'progress': {
                const r = reservations[o.ref % Math.max(1, reservations.length)];
                if (r) await ledger.reportProgress(r.id, o.units * UNIT);
                return;
              }
              case 'expire':
                await ledger.expireDue();
                return;
            }
          };

          for (const batch of batches) {
            await Promise.all(
              batch.map((o) =>
                run(o).catch((err: unknown) => {
                  if (!(err instanceof ApiError && EXPECTED_REFUSALS.has(err.code))) unexpected.push(err);
                }),
              ),
            );
          }
          // Settle half of what is left concurrently, then let the janitor take the rest.
          await Promise.all(
            reservations.map((r, i) =>
              i % 2 === 0
                ? ledger.settle(r.id, Math.floor(r.amount / 2)).catch((e: unknown) => unexpected.push(e))
                : undefined,
            ),
          );
          expect(unexpected).toEqual([]);
          await checkInvariants(tenants, keys.flat());

          await s.sql`update credit_reservations set expires_at = now() - interval '1 second'
                      where tenant_id = any(${tenants}) and status = 'open'`;
          while ((await ledger.expireDue()).length > 0) {
            /* drain */
          }
          await checkInvariants(tenants, keys.flat());
          const [open] = await s.sql<{ n: number }[]>`
            select count(*)::int as n from credit_reservations where tenant_id = any(${tenants}) and status = 'open'`;
          expect(open!.n).toBe(0);
          for (const t of tenants) expect((await ledger.balance(t)).reservedCreditMicros).toBe(0);
        },
      ),
      { numRuns: 20 },
    );
    expect(runs).toBeGreaterThanOrEqual(20);
  });
});
