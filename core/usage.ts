import type { Sql, Tx } from './platform/db/index.ts';
import type { CreditLedger } from './credits/ledger.ts';
import { MICROS_PER_SECOND } from './credits/ledger.ts';
import { newId } from './platform/ids.ts';
import { encodeCursor } from './platform/paging.ts';

type SessionKind = 'turn' | 'live' | 'lipsync' | 'generation';
type SessionStatus = 'reserved' | 'started' | 'released' | 'failed';

export interface SessionUsage {
  sessionId: string;
  kind: SessionKind;
  avatarId: string | null;
  endUserId: string | null;
  status: SessionStatus;
  startedAt: string | null;
  endedAt: string | null;
  billableSeconds: number;
  billedCreditMicros: number;
  createdAt: string;
}

interface UsageRow {
  id: string;
  tenant_id: string;
  kind: SessionKind;
  avatar_id: string | null;
  end_user_id: string | null;
  status: SessionStatus;
  reservation_id: string | null;
  started_at: Date | null;
  ended_at: Date | null;
  billable_ms: number;
  billed_credit_micros: number;
  created_at: Date;
}

const toUsage = (r: UsageRow): SessionUsage => ({
  sessionId: r.id,
  kind: r.kind,
  avatarId: r.avatar_id,
  endUserId: r.end_user_id,
  status: r.status,
  startedAt: r.started_at?.toISOString() ?? null,
  endedAt: r.ended_at?.toISOString() ?? null,
  billableSeconds: r.billable_ms / 1000,
  billedCreditMicros: r.billed_credit_micros,
  createdAt: r.created_at.toISOString(),
});

export interface OpenSessionInput {
  /** The session's id when the caller chose it first (a live call holds its capacity slot under it); default a new one. */
  sessionId?: string;
  tenantId: string;
  apiKeyId: string | null;
  kind: SessionKind;
  avatarId?: string | null;
  endUserId?: string | null;
  /** Credits held up front (estimate for a turn; the duration cap for a live call). */
  reserveCreditMicros: number;
  ttlSeconds: number;
}

export interface UsageWindow {
  from: Date;
  to: Date;
}

export const USAGE_DEFAULT_DAYS = 30;
export const USAGE_MAX_DAYS = 90;
const DAY_MS = 86_400_000;

/**
 * The effective window of a usage read: `to` defaults to now, `from` to 30 days before `to`, and a
 * window wider than 90 days is narrowed (from moves up), never refused.
 */
export function effectiveWindow(from?: Date, to?: Date, now = new Date()): UsageWindow {
  const end = to ?? now;
  let start = from ?? new Date(end.getTime() - USAGE_DEFAULT_DAYS * DAY_MS);
  if (end.getTime() - start.getTime() > USAGE_MAX_DAYS * DAY_MS)
    start = new Date(end.getTime() - USAGE_MAX_DAYS * DAY_MS);
  return { from: start, to: end };
}

// The cursor codec lives in core/platform/paging.ts (shared by every paged list); still importable from here.
export { decodeCursor, encodeCursor } from './platform/paging.ts';

/** Billable sessions (turns, live calls, lipsync renders): one usage row each, tied to a credit reservation. */
export class UsageStore {
  constructor(
    private readonly sql: Sql,
    private readonly ledger: CreditLedger,
  ) {}

  /** Reserves credits and records the session as `reserved`, atomically. */
  async open(input: OpenSessionInput, tx?: Tx): Promise<{ sessionId: string; reservationId: string }> {
    const work = async (tx: Tx) => {
      const reservation = await this.ledger.reserve(
        {
          tenantId: input.tenantId,
          apiKeyId: input.apiKeyId,
          amountCreditMicros: input.reserveCreditMicros,
          purpose: input.kind,
          ttlSeconds: input.ttlSeconds,
        },
        tx,
      );
      const id = input.sessionId ?? newId('session');
      // created_at to the millisecond: the paging cursor carries a JS Date (milliseconds), and a
      // microsecond part would make `(created_at, id) < cursor` skip rows of the cursor's millisecond.
      await tx`insert into session_usage (id, tenant_id, api_key_id, kind, avatar_id, end_user_id, status, reservation_id, created_at)
               values (${id}, ${input.tenantId}, ${input.apiKeyId}, ${input.kind}, ${input.avatarId ?? null},
                       ${input.endUserId ?? null}, 'reserved', ${reservation.id}, date_trunc('milliseconds', now()))`;
      return { sessionId: id, reservationId: reservation.id };
    };
    return tx ? work(tx) : (this.sql.begin(work) as Promise<{ sessionId: string; reservationId: string }>);
  }

  /** Names the avatar of a session that learned it only after opening (a lipsync registering its portrait). */
  async attachAvatar(sessionId: string, avatarId: string): Promise<void> {
    await this
      .sql`update session_usage set avatar_id = ${avatarId}, updated_at = now() where id = ${sessionId} and avatar_id is null`;
  }

  async start(sessionId: string): Promise<void> {
    await this
      .sql`update session_usage set status = 'started', started_at = coalesce(started_at, now()), updated_at = now()
                   where id = ${sessionId} and status = 'reserved'`;
  }

  /**
   * Ends a session: `released` settles the reservation to the billable time (capped at the
   * reservation); `failed` charges nothing. Idempotent: a second call changes nothing.
   */
  async finish(
    sessionId: string,
    outcome: { status: 'released' | 'failed'; billableMs: number },
    inTx?: Tx,
  ): Promise<SessionUsage | undefined> {
    const run = <T>(fn: (tx: Tx) => Promise<T>): Promise<T> => (inTx ? fn(inTx) : (this.sql.begin(fn) as Promise<T>));
    return run(async (tx) => {
      const [row] = await tx<UsageRow[]>`select * from session_usage where id = ${sessionId} for update`;
      if (!row) return undefined;
      if (row.status === 'released' || row.status === 'failed') return toUsage(row);
      const billableMs = outcome.status === 'failed' ? 0 : Math.max(0, Math.round(outcome.billableMs));
      const wanted = Math.round((billableMs * MICROS_PER_SECOND) / 1000);
      const { chargedCreditMicros } = row.reservation_id
        ? await this.ledger.settle(row.reservation_id, wanted, tx)
        : { chargedCreditMicros: 0 };
      // A failed session bills nothing, unless the janitor already settled its reservation at the
      // reported progress (holder presumed dead): then it ends released with that charge, as the
      // janitor would have recorded it (a failed row always shows 0).
      const status = chargedCreditMicros > 0 ? 'released' : outcome.status;
      // Billable time is what was paid for: capped with the charge.
      const chargedMs = Math.floor((chargedCreditMicros * 1000) / MICROS_PER_SECOND);
      const paidMs = outcome.status === 'failed' ? chargedMs : Math.min(billableMs, chargedMs);
      const [updated] = await tx<UsageRow[]>`
        update session_usage set status = ${status}, ended_at = now(), updated_at = now(),
          started_at = coalesce(started_at, now()), billable_ms = ${paidMs}, billed_credit_micros = ${chargedCreditMicros}
        where id = ${sessionId} returning *`;
      return toUsage(updated!);
    });
  }

  /**
   * Closes every session still open whose reservation is already closed (the janitor expired it),
   * with what was charged. A sweep rather than a list of ids, so a janitor that died between
   * expiring and closing leaves nothing behind: the next pass finds those sessions.
   */
  async closeOrphaned(): Promise<number> {
    const rows = await this.sql`
      update session_usage u set
        status = case when r.settled_credit_micros > 0 then 'released' else 'failed' end,
        billed_credit_micros = coalesce(r.settled_credit_micros, 0),
        billable_ms = coalesce(r.settled_credit_micros, 0) / 1000,
        ended_at = now(), updated_at = now()
      from credit_reservations r
      where u.reservation_id = r.id and u.status in ('reserved', 'started') and r.status <> 'open'`;
    return rows.count;
  }

  async get(tenantId: string, sessionId: string): Promise<SessionUsage | undefined> {
    const [row] = await this.sql<
      UsageRow[]
    >`select * from session_usage where tenant_id = ${tenantId} and id = ${sessionId}`;
    return row && toUsage(row);
  }

  /** Sessions created within the window, newest first, keyset-paged. */
  async list(
    tenantId: string,
    q: { window: UsageWindow; endUserId?: string; after?: { createdAt: Date; id: string }; limit: number },
  ): Promise<{ data: SessionUsage[]; nextCursor: string | null }> {
    const sql = this.sql;
    const rows = await sql<UsageRow[]>`
      select * from session_usage
      where tenant_id = ${tenantId}
        and created_at >= ${q.window.from} and created_at <= ${q.window.to}
        ${q.endUserId !== undefined ? sql`and end_user_id = ${q.endUserId}` : sql``}
        ${q.after ? sql`and (created_at, id) < (${q.after.createdAt}, ${q.after.id})` : sql``}
      order by created_at desc, id desc
      limit ${q.limit + 1}`;
    const page = rows.slice(0, q.limit);
    const last = page[page.length - 1];
    return {
      data: page.map(toUsage),
      nextCursor: rows.length > q.limit && last ? encodeCursor(last.created_at, last.id) : null,
    };
  }
}
