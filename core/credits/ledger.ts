import type { Sql, Tx } from '../platform/db/index.ts';
import { ApiError } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';

/** 1 realtime second = 1,000,000 credit micros (the unit of every price and balance). */
export const MICROS_PER_SECOND = 1_000_000;

export interface Balance {
  tenantId: string;
  balanceCreditMicros: number;
  reservedCreditMicros: number;
  availableCreditMicros: number;
  lifetimeGrantedCreditMicros: number;
  lifetimeUsedCreditMicros: number;
  updatedAt: string;
}

export interface Reservation {
  id: string;
  tenantId: string;
  apiKeyId: string | null;
  amountCreditMicros: number;
  status: 'open' | 'settled' | 'expired';
  settledCreditMicros: number | null;
  expiresAt: Date;
}

export interface ReserveInput {
  tenantId: string;
  /** The key that pays; its spend limit applies, and so does that of every key it was minted under. */
  apiKeyId?: string | null;
  amountCreditMicros: number;
  purpose: string;
  /** How long the holder may keep it before the janitor settles it at its reported progress. */
  ttlSeconds: number;
}

interface WalletRow {
  tenant_id: string;
  balance_credit_micros: number;
  reserved_credit_micros: number;
  lifetime_granted_credit_micros: number;
  lifetime_used_credit_micros: number;
  updated_at: Date;
}

interface ReservationRow {
  id: string;
  tenant_id: string;
  api_key_id: string | null;
  amount_credit_micros: number;
  progress_credit_micros: number;
  settled_credit_micros: number | null;
  status: Reservation['status'];
  expires_at: Date;
}

/** One key of a paying key's chain: itself and every key above it (docs/api.md, "keys that mint keys"). */
interface ChainKey {
  id: string;
  spend_limit_credit_micros: number | null;
  /** Spent plus reserved, by this key and every key under it. */
  committed: number;
  self: boolean;
}

/** What a key can still spend: the least room left by any limit along its chain (null: no limit applies). */
export interface SpendRoom {
  roomCreditMicros: number | null;
  /** The key whose limit leaves the least room, and that limit (null when no limit applies). */
  limitingKey: { id: string; spendLimitCreditMicros: number; self: boolean } | null;
}

function spendRoomOf(chain: readonly ChainKey[]): SpendRoom {
  let best: SpendRoom = { roomCreditMicros: null, limitingKey: null };
  for (const k of chain) {
    if (k.spend_limit_credit_micros === null) continue;
    const room = k.spend_limit_credit_micros - k.committed;
    if (best.roomCreditMicros === null || room < best.roomCreditMicros) {
      best = {
        roomCreditMicros: room,
        limitingKey: { id: k.id, spendLimitCreditMicros: k.spend_limit_credit_micros, self: k.self },
      };
    }
  }
  return best;
}

/** The paying key and every key it was minted under, with what each has committed. */
async function keyChain(sql: Sql | Tx, apiKeyId: string): Promise<ChainKey[]> {
  return sql<ChainKey[]>`
    select a.id, a.spend_limit_credit_micros, a.spent_credit_micros + a.reserved_credit_micros as committed, a.id = k.id as self
    from api_keys k join api_keys a on a.id = any(k.ancestor_ids || k.id)
    where k.id = ${apiKeyId}`;
}

/**
 * How much a key may still reserve under its own limit and those of the keys it was minted under.
 * Exact only inside a transaction holding the tenant's wallet lock.
 */
export async function spendRoom(sql: Sql | Tx, apiKeyId: string): Promise<SpendRoom> {
  return spendRoomOf(await keyChain(sql, apiKeyId));
}

/** 402 spend_limit_exceeded naming the key whose limit refuses (the paying key, or one it was minted under). */
export function spendLimitError(room: SpendRoom, what: string): ApiError {
  const k = room.limitingKey!;
  const used = k.spendLimitCreditMicros - room.roomCreditMicros!;
  const whose = k.self
    ? `This API key's spend limit of ${k.spendLimitCreditMicros} credit micros`
    : `The spend limit of ${k.id}, a key this API key was minted under, of ${k.spendLimitCreditMicros} credit micros`;
  const by = k.self ? 'by this key and the keys minted under it' : `by ${k.id} and the keys minted under it`;
  return new ApiError('spend_limit_exceeded', `${whose} ${what} (${used} already spent or reserved ${by})`, {
    spendLimitCreditMicros: k.spendLimitCreditMicros,
    spendLimitKeyId: k.id,
  });
}

const toBalance = (w: WalletRow): Balance => ({
  tenantId: w.tenant_id,
  balanceCreditMicros: w.balance_credit_micros,
  reservedCreditMicros: w.reserved_credit_micros,
  availableCreditMicros: w.balance_credit_micros - w.reserved_credit_micros,
  lifetimeGrantedCreditMicros: w.lifetime_granted_credit_micros,
  lifetimeUsedCreditMicros: w.lifetime_used_credit_micros,
  updatedAt: w.updated_at.toISOString(),
});

const toReservation = (r: ReservationRow): Reservation => ({
  id: r.id,
  tenantId: r.tenant_id,
  apiKeyId: r.api_key_id,
  amountCreditMicros: r.amount_credit_micros,
  status: r.status,
  settledCreditMicros: r.settled_credit_micros,
  expiresAt: r.expires_at,
});

function assertMicros(name: string, v: number, min = 0): void {
  if (!Number.isSafeInteger(v) || v < min) throw new RangeError(`${name} must be an integer >= ${min}, got ${v}`);
}

/**
 * The credit wallet of each tenant. Invariants (property-tested): the balance never goes negative,
 * the ledger rows sum to the balance, reserved equals the sum of open reservations, and a
 * settlement never exceeds its reservation. Every operation locks the tenant's wallet row first
 * (then the key rows), so concurrent operations serialise per tenant without deadlocks. A key's
 * spent and reserved count its own reservations and those of every key minted under it, so a
 * reservation is checked against, and moves, the counters of the key's whole chain.
 */
export class CreditLedger {
  constructor(private readonly sql: Sql) {}

  private run<T>(tx: Tx | undefined, fn: (tx: Tx) => Promise<T>): Promise<T> {
    return tx ? fn(tx) : (this.sql.begin(fn) as Promise<T>);
  }

  private async lockWallet(tx: Tx, tenantId: string): Promise<WalletRow> {
    const [w] = await tx<WalletRow[]>`select * from credit_wallets where tenant_id = ${tenantId} for update`;
    if (!w) throw new ApiError('not_found', 'Tenant not found');
    return w;
  }

  async balance(tenantId: string): Promise<Balance> {
    const [w] = await this.sql<WalletRow[]>`select * from credit_wallets where tenant_id = ${tenantId}`;
    if (!w) throw new ApiError('not_found', 'Tenant not found');
    return toBalance(w);
  }

  async grant(tenantId: string, amountCreditMicros: number, note = 'grant', tx?: Tx): Promise<Balance> {
    assertMicros('amountCreditMicros', amountCreditMicros, 1);
    return this.run(tx, async (tx) => {
      await this.lockWallet(tx, tenantId);
      await tx`insert into credit_ledger (id, tenant_id, kind, amount_credit_micros, note)
               values (${newId('ledgerEntry')}, ${tenantId}, 'grant', ${amountCreditMicros}, ${note})`;
      const [w] = await tx<WalletRow[]>`
        update credit_wallets set balance_credit_micros = balance_credit_micros + ${amountCreditMicros},
          lifetime_granted_credit_micros = lifetime_granted_credit_micros + ${amountCreditMicros}, updated_at = now()
        where tenant_id = ${tenantId} returning *`;
      return toBalance(w!);
    });
  }

  /**
   * 402 when nothing could be spent now: insufficient_credits when the workspace has no available
   * credits, spend_limit_exceeded when the spend limit of the key, or of a key it was minted under,
   * is used up (spent plus reserved).
   */
  async assertSpendable(tenantId: string, apiKeyId?: string | null): Promise<void> {
    const [w] = await this.sql<WalletRow[]>`select * from credit_wallets where tenant_id = ${tenantId}`;
    if (!w) throw new ApiError('not_found', 'Tenant not found');
    const available = w.balance_credit_micros - w.reserved_credit_micros;
    if (available <= 0) {
      throw new ApiError('insufficient_credits', `Insufficient credits: ${available} credit micros are available`, {
        requiredCreditMicros: 1,
        availableCreditMicros: available,
      });
    }
    if (!apiKeyId) return;
    const room = await spendRoom(this.sql, apiKeyId);
    if (room.roomCreditMicros !== null && room.roomCreditMicros <= 0) throw spendLimitError(room, 'is used up');
  }

  /** Holds credits up front. 402 insufficient_credits or spend_limit_exceeded when it cannot. */
  async reserve(input: ReserveInput, tx?: Tx): Promise<Reservation> {
    assertMicros('amountCreditMicros', input.amountCreditMicros, 1);
    if (!Number.isFinite(input.ttlSeconds) || input.ttlSeconds < 0) {
      throw new RangeError(`ttlSeconds must be a number >= 0, got ${input.ttlSeconds}`);
    }
    return this.run(tx, async (tx) => {
      const w = await this.lockWallet(tx, input.tenantId);
      const available = w.balance_credit_micros - w.reserved_credit_micros;
      if (available < input.amountCreditMicros) {
        throw new ApiError(
          'insufficient_credits',
          `Insufficient credits: this needs ${input.amountCreditMicros} credit micros and ${available} are available`,
          { requiredCreditMicros: input.amountCreditMicros, availableCreditMicros: available },
        );
      }
      if (input.apiKeyId) {
        // The reservation counts against the key and every key above it. Every key of the chain
        // belongs to this tenant, whose wallet lock we hold: no other credit operation can move
        // these counters between the check and the update.
        const room = await spendRoom(tx, input.apiKeyId);
        if (room.roomCreditMicros !== null && room.roomCreditMicros < input.amountCreditMicros) {
          throw spendLimitError(room, 'would be exceeded');
        }
        await tx`update api_keys a set reserved_credit_micros = a.reserved_credit_micros + ${input.amountCreditMicros}
                 from api_keys k where k.id = ${input.apiKeyId} and a.id = any(k.ancestor_ids || k.id)`;
      }
      const [r] = await tx<ReservationRow[]>`
        insert into credit_reservations (id, tenant_id, api_key_id, purpose, amount_credit_micros, expires_at)
        values (${newId('reservation')}, ${input.tenantId}, ${input.apiKeyId ?? null}, ${input.purpose},
                ${input.amountCreditMicros}, now() + make_interval(secs => ${input.ttlSeconds}))
        returning *`;
      await tx`update credit_wallets set reserved_credit_micros = reserved_credit_micros + ${input.amountCreditMicros},
               updated_at = now() where tenant_id = ${input.tenantId}`;
      return toReservation(r!);
    });
  }

  /** Records usage so far (never above the reservation), so a crash still bills what was delivered. */
  async reportProgress(reservationId: string, usedCreditMicros: number, extendSeconds?: number): Promise<void> {
    assertMicros('usedCreditMicros', usedCreditMicros);
    await this.sql`
      update credit_reservations
      set progress_credit_micros = least(amount_credit_micros, greatest(progress_credit_micros, ${usedCreditMicros})),
          expires_at = case when ${extendSeconds ?? null}::float8 is null then expires_at
                            else greatest(expires_at, now() + make_interval(secs => ${extendSeconds ?? 0})) end
      where id = ${reservationId} and status = 'open'`;
  }

  /**
   * Charges actual usage, capped at the reservation, and releases the rest. Idempotent: settling a
   * reservation that is already closed returns what was charged then.
   */
  async settle(reservationId: string, actualCreditMicros: number, tx?: Tx): Promise<{ chargedCreditMicros: number }> {
    assertMicros('actualCreditMicros', actualCreditMicros);
    return this.run(tx, async (tx) => {
      const { chargedCreditMicros } = await this.close(tx, reservationId, () => actualCreditMicros, 'settled');
      return { chargedCreditMicros };
    });
  }

  /** Settles every open reservation past its expiry at its reported progress (the janitor). */
  async expireDue(limit = 100): Promise<string[]> {
    const due = await this.sql<{ id: string }[]>`
      select id from credit_reservations where status = 'open' and expires_at <= now()
      order by expires_at limit ${limit}`;
    const expired: string[] = [];
    for (const { id } of due) {
      await this.sql.begin(async (tx) => {
        const res = await this.close(tx, id, (r) => r.progress_credit_micros, 'expired', true);
        if (res.closedNow) expired.push(id);
      });
    }
    return expired;
  }

  private async close(
    tx: Tx,
    reservationId: string,
    charge: (r: ReservationRow) => number,
    status: 'settled' | 'expired',
    onlyIfDue = false,
  ): Promise<{ chargedCreditMicros: number; closedNow: boolean }> {
    const [peek] = await tx<ReservationRow[]>`select * from credit_reservations where id = ${reservationId}`;
    if (!peek) throw new ApiError('not_found', 'Reservation not found');
    await this.lockWallet(tx, peek.tenant_id);
    // Due by the database clock (the one expires_at was set with), not this process's clock.
    const [r] = await tx<(ReservationRow & { due: boolean })[]>`
      select *, expires_at <= now() as due from credit_reservations where id = ${reservationId} for update`;
    if (r!.status !== 'open' || (onlyIfDue && !r!.due)) {
      return { chargedCreditMicros: r!.settled_credit_micros ?? 0, closedNow: false };
    }
    const charged = Math.min(charge(r!), r!.amount_credit_micros);
    await tx`update credit_reservations set status = ${status}, settled_credit_micros = ${charged}, settled_at = now()
             where id = ${reservationId}`;
    await tx`update credit_wallets set
               balance_credit_micros = balance_credit_micros - ${charged},
               reserved_credit_micros = reserved_credit_micros - ${r!.amount_credit_micros},
               lifetime_used_credit_micros = lifetime_used_credit_micros + ${charged}, updated_at = now()
             where tenant_id = ${r!.tenant_id}`;
    if (charged > 0) {
      await tx`insert into credit_ledger (id, tenant_id, kind, amount_credit_micros, reservation_id, note)
               values (${newId('ledgerEntry')}, ${r!.tenant_id}, 'usage', ${-charged}, ${reservationId}, ${status})`;
    }
    if (r!.api_key_id) {
      // Along the whole chain, as the reservation was counted (reserve).
      await tx`update api_keys a set reserved_credit_micros = a.reserved_credit_micros - ${r!.amount_credit_micros},
               spent_credit_micros = a.spent_credit_micros + ${charged}
               from api_keys k where k.id = ${r!.api_key_id} and a.id = any(k.ancestor_ids || k.id)`;
    }
    return { chargedCreditMicros: charged, closedNow: true };
  }

  async getReservation(id: string): Promise<Reservation | undefined> {
    const [r] = await this.sql<ReservationRow[]>`select * from credit_reservations where id = ${id}`;
    return r && toReservation(r);
  }
}
