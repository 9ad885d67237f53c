import { expect } from 'vitest';
import type { Sql } from '../core/platform/db/index.ts';

/**
 * The credit ledger's invariants, checked on the rows of `tenants` and `keys`: balances never
 * negative, the ledger sums to the balance, reserved equals the open reservations, every
 * settlement within its reservation, each key's spent and reserved match its reservations and those
 * of every key minted under it, and stay within its spend limit.
 */
export async function checkLedgerInvariants(sql: Sql, tenants: string[], keys: string[]): Promise<void> {
  // The CHECK constraints of the schema hold (the wallet could not be written otherwise) and we re-check them.
  const wallets = await sql<
    {
      tenant_id: string;
      balance_credit_micros: number;
      reserved_credit_micros: number;
      lifetime_granted_credit_micros: number;
      lifetime_used_credit_micros: number;
    }[]
  >`
    select * from credit_wallets where tenant_id = any(${tenants})`;
  expect(wallets).toHaveLength(tenants.length);
  for (const w of wallets) {
    expect(w.balance_credit_micros).toBeGreaterThanOrEqual(0);
    expect(w.reserved_credit_micros).toBeGreaterThanOrEqual(0);
    expect(w.reserved_credit_micros).toBeLessThanOrEqual(w.balance_credit_micros);

    const [sums] = await sql<{ total: number; granted: number; used: number }[]>`
      select coalesce(sum(amount_credit_micros), 0)::bigint as total,
             coalesce(sum(amount_credit_micros) filter (where kind = 'grant'), 0)::bigint as granted,
             coalesce(-sum(amount_credit_micros) filter (where kind = 'usage'), 0)::bigint as used
      from credit_ledger where tenant_id = ${w.tenant_id}`;
    expect(sums!.total, 'ledger rows sum to the balance').toBe(w.balance_credit_micros);
    expect(sums!.granted, 'grant rows sum to lifetime granted').toBe(w.lifetime_granted_credit_micros);
    expect(sums!.used, 'usage rows sum to lifetime used').toBe(w.lifetime_used_credit_micros);

    const [res] = await sql<{ open: number; settled: number }[]>`
      select coalesce(sum(amount_credit_micros) filter (where status = 'open'), 0)::bigint as open,
             coalesce(sum(settled_credit_micros) filter (where status <> 'open'), 0)::bigint as settled
      from credit_reservations where tenant_id = ${w.tenant_id}`;
    expect(res!.open, 'reserved equals the open reservations').toBe(w.reserved_credit_micros);
    expect(res!.settled, 'closed reservations sum to lifetime used').toBe(w.lifetime_used_credit_micros);
  }

  const [bad] = await sql<{ n: number }[]>`
    select count(*)::int as n from credit_reservations where tenant_id = any(${tenants}) and (
      (status = 'open' and settled_credit_micros is not null) or
      (status <> 'open' and (settled_credit_micros is null or settled_credit_micros > amount_credit_micros or settled_credit_micros < 0)) or
      progress_credit_micros > amount_credit_micros)`;
  expect(bad!.n, 'every settlement within its reservation').toBe(0);

  const [usageRows] = await sql<{ n: number }[]>`
    select count(*)::int as n from credit_ledger l join credit_reservations r on r.id = l.reservation_id
    where l.tenant_id = any(${tenants}) and (l.kind <> 'usage' or -l.amount_credit_micros <> r.settled_credit_micros)`;
  expect(usageRows!.n, 'each usage row matches its settlement').toBe(0);

  const keyRows = await sql<
    {
      id: string;
      spend_limit_credit_micros: number | null;
      spent_credit_micros: number;
      reserved_credit_micros: number;
      open: number;
      settled: number;
    }[]
  >`
    select k.id, k.spend_limit_credit_micros, k.spent_credit_micros, k.reserved_credit_micros,
      (select coalesce(sum(r.amount_credit_micros), 0)::bigint from credit_reservations r join api_keys payer on payer.id = r.api_key_id
       where (payer.id = k.id or k.id = any(payer.ancestor_ids)) and r.status = 'open') as open,
      (select coalesce(sum(r.settled_credit_micros), 0)::bigint from credit_reservations r join api_keys payer on payer.id = r.api_key_id
       where (payer.id = k.id or k.id = any(payer.ancestor_ids)) and r.status <> 'open') as settled
    from api_keys k where k.id = any(${keys})`;
  expect(keyRows).toHaveLength(keys.length);
  for (const k of keyRows) {
    expect(k.reserved_credit_micros, `key ${k.id} reserved`).toBe(k.open);
    expect(k.spent_credit_micros, `key ${k.id} spent`).toBe(k.settled);
    if (k.spend_limit_credit_micros !== null) {
      expect(k.spent_credit_micros + k.reserved_credit_micros).toBeLessThanOrEqual(k.spend_limit_credit_micros);
    }
  }
}
