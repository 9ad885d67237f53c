import { afterAll, describe, expect, it } from 'vitest';
import { testServices } from '../test/helpers.ts';
import { MICROS_PER_SECOND } from './credits/ledger.ts';
import { ApiError } from './platform/errors.ts';
import {
  decodeCursor,
  effectiveWindow,
  encodeCursor,
  USAGE_DEFAULT_DAYS,
  USAGE_MAX_DAYS,
  type OpenSessionInput,
  type SessionUsage,
} from './usage.ts';

const DAY = 86_400_000;
const SEC = MICROS_PER_SECOND;

describe('usage window', () => {
  const now = new Date('2026-03-31T12:00:00.000Z');

  it('defaults to the trailing 30 days ending now', () => {
    expect(USAGE_DEFAULT_DAYS).toBe(30);
    const w = effectiveWindow(undefined, undefined, now);
    expect(w.to).toEqual(now);
    expect(w.to.getTime() - w.from.getTime()).toBe(30 * DAY);
  });

  it('with only `to`, covers the 30 days before it', () => {
    const to = new Date('2026-01-15T00:00:00.000Z');
    expect(effectiveWindow(undefined, to, now)).toEqual({ from: new Date(to.getTime() - 30 * DAY), to });
  });

  it('with only `from`, ends now', () => {
    const from = new Date(now.getTime() - 10 * DAY);
    expect(effectiveWindow(from, undefined, now)).toEqual({ from, to: now });
  });

  it('keeps an explicit window of up to 90 days as given', () => {
    const from = new Date('2026-01-01T00:00:00.000Z');
    const to = new Date('2026-01-11T06:30:00.000Z');
    expect(effectiveWindow(from, to, now)).toEqual({ from, to });
    const ninety = new Date(to.getTime() - 90 * DAY);
    expect(effectiveWindow(ninety, to, now)).toEqual({ from: ninety, to });
  });

  it('narrows a wider window to 90 days by moving `from` up, never refusing it', () => {
    expect(USAGE_MAX_DAYS).toBe(90);
    const to = new Date('2026-03-01T00:00:00.000Z');
    const w = effectiveWindow(new Date(to.getTime() - 400 * DAY), to, now);
    expect(w.to).toEqual(to);
    expect(w.from).toEqual(new Date(to.getTime() - 90 * DAY));
    const open = effectiveWindow(new Date(0), undefined, now);
    expect(open).toEqual({ from: new Date(now.getTime() - 90 * DAY), to: now });
  });
});

describe('usage cursor', () => {
  it('round-trips the position it encodes', () => {
    const at = new Date('2026-02-03T04:05:06.789Z');
    expect(decodeCursor(encodeCursor(at, 'ses_abc'))).toEqual({ createdAt: at, id: 'ses_abc' });
  });

  it('is opaque: url-safe text', () => {
    expect(encodeCursor(new Date(), 'ses_x/y+z')).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it.each([
    ['garbage', 'not a cursor!!'],
    ['empty', ''],
    ['an object', Buffer.from('{"a":1}').toString('base64url')],
    ['a bad date', Buffer.from('["yesterday","ses_1"]').toString('base64url')],
    ['numbers', Buffer.from('[1,2]').toString('base64url')],
    ['three items', Buffer.from('["2026-01-01T00:00:00Z","ses_1","x"]').toString('base64url')],
  ])('decodes %s to undefined', (_name, cursor) => {
    expect(decodeCursor(cursor)).toBeUndefined();
  });
});

const s = await testServices();
afterAll(() => s.close());

async function tenantWith(seconds: number): Promise<{ tenantId: string; apiKeyId: string }> {
  const t = await s.tenants.create('usage test');
  if (seconds > 0) await s.ledger.grant(t.id, seconds * SEC);
  const { record } = await s.keys.create({ tenantId: t.id, name: 'k', scopes: ['*'] });
  return { tenantId: t.id, apiKeyId: record.id };
}

function openInput(t: { tenantId: string; apiKeyId: string }, over: Partial<OpenSessionInput> = {}): OpenSessionInput {
  return { ...t, kind: 'turn', reserveCreditMicros: 5 * SEC, ttlSeconds: 60, ...over };
}

async function keySpent(id: string): Promise<{ spent: number; reserved: number }> {
  const [k] = await s.sql<{ spent: number; reserved: number }[]>`
    select spent_credit_micros as spent, reserved_credit_micros as reserved from api_keys where id = ${id}`;
  return k!;
}

describe('UsageStore: one row per billable session', () => {
  it('open reserves the credits and records the session as reserved', async () => {
    const t = await tenantWith(20);
    const { sessionId, reservationId } = await s.usage.open(openInput(t, { avatarId: 'ava_1', endUserId: 'user-1' }));
    expect(sessionId).toMatch(/^ses_/);
    const row = await s.usage.get(t.tenantId, sessionId);
    expect(row).toMatchObject({
      sessionId,
      kind: 'turn',
      avatarId: 'ava_1',
      endUserId: 'user-1',
      status: 'reserved',
      startedAt: null,
      endedAt: null,
      billableSeconds: 0,
      billedCreditMicros: 0,
    });
    expect(await s.ledger.getReservation(reservationId)).toMatchObject({
      status: 'open',
      amountCreditMicros: 5 * SEC,
      apiKeyId: t.apiKeyId,
    });
    expect(await s.ledger.balance(t.tenantId)).toMatchObject({
      balanceCreditMicros: 20 * SEC,
      reservedCreditMicros: 5 * SEC,
    });
    expect(await keySpent(t.apiKeyId)).toEqual({ spent: 0, reserved: 5 * SEC });
  });

  it('open without enough credits is 402 and writes no session row', async () => {
    const t = await tenantWith(1);
    const err = await s.usage.open(openInput(t, { reserveCreditMicros: 2 * SEC })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe('insufficient_credits');
    const [n] = await s.sql<
      { n: number }[]
    >`select count(*)::int as n from session_usage where tenant_id = ${t.tenantId}`;
    expect(n!.n).toBe(0);
  });

  it('start moves a reserved session to started and stamps startedAt', async () => {
    const t = await tenantWith(20);
    const { sessionId } = await s.usage.open(openInput(t));
    await s.usage.start(sessionId);
    const row = await s.usage.get(t.tenantId, sessionId);
    expect(row?.status).toBe('started');
    expect(row?.startedAt).not.toBeNull();
    expect(row?.billedCreditMicros).toBe(0);
  });

  it('finish released bills the billable time and settles the ledger, releasing the rest', async () => {
    const t = await tenantWith(20);
    const { sessionId, reservationId } = await s.usage.open(openInput(t));
    await s.usage.start(sessionId);
    const done = await s.usage.finish(sessionId, { status: 'released', billableMs: 2_500 });
    expect(done).toMatchObject({ status: 'released', billableSeconds: 2.5, billedCreditMicros: 2.5 * SEC });
    expect(done?.endedAt).not.toBeNull();
    expect(await s.ledger.getReservation(reservationId)).toMatchObject({
      status: 'settled',
      settledCreditMicros: 2.5 * SEC,
    });
    expect(await s.ledger.balance(t.tenantId)).toMatchObject({
      balanceCreditMicros: 17.5 * SEC,
      reservedCreditMicros: 0,
      lifetimeUsedCreditMicros: 2.5 * SEC,
    });
    expect(await keySpent(t.apiKeyId)).toEqual({ spent: 2.5 * SEC, reserved: 0 });
    expect(await s.usage.get(t.tenantId, sessionId)).toEqual(done);
  });

  it('finish released caps the bill at the reservation', async () => {
    const t = await tenantWith(20);
    const { sessionId } = await s.usage.open(openInput(t, { reserveCreditMicros: 3 * SEC }));
    await s.usage.start(sessionId);
    const done = await s.usage.finish(sessionId, { status: 'released', billableMs: 60_000 });
    expect(done).toMatchObject({ status: 'released', billableSeconds: 3, billedCreditMicros: 3 * SEC });
    expect(await s.ledger.balance(t.tenantId)).toMatchObject({
      balanceCreditMicros: 17 * SEC,
      reservedCreditMicros: 0,
    });
  });

  it('finish failed bills 0 and releases the whole reservation', async () => {
    const t = await tenantWith(20);
    const { sessionId, reservationId } = await s.usage.open(openInput(t));
    await s.usage.start(sessionId);
    const done = await s.usage.finish(sessionId, { status: 'failed', billableMs: 4_000 });
    expect(done).toMatchObject({ status: 'failed', billableSeconds: 0, billedCreditMicros: 0 });
    expect(await s.ledger.getReservation(reservationId)).toMatchObject({ status: 'settled', settledCreditMicros: 0 });
    expect(await s.ledger.balance(t.tenantId)).toMatchObject({
      balanceCreditMicros: 20 * SEC,
      reservedCreditMicros: 0,
    });
    expect(await keySpent(t.apiKeyId)).toEqual({ spent: 0, reserved: 0 });
  });

  it('a reserved session that never started can be finished too', async () => {
    const t = await tenantWith(20);
    const { sessionId } = await s.usage.open(openInput(t));
    const done = await s.usage.finish(sessionId, { status: 'failed', billableMs: 0 });
    expect(done?.status).toBe('failed');
    expect((await s.ledger.balance(t.tenantId)).reservedCreditMicros).toBe(0);
  });

  it('finishing twice changes nothing: the first outcome and charge stand', async () => {
    const t = await tenantWith(20);
    const { sessionId } = await s.usage.open(openInput(t));
    await s.usage.start(sessionId);
    const first = await s.usage.finish(sessionId, { status: 'released', billableMs: 1_000 });
    const balance = await s.ledger.balance(t.tenantId);
    const again = await s.usage.finish(sessionId, { status: 'released', billableMs: 4_000 });
    const failed = await s.usage.finish(sessionId, { status: 'failed', billableMs: 0 });
    expect(again).toEqual(first);
    expect(failed).toEqual(first);
    await s.usage.start(sessionId);
    expect(await s.usage.get(t.tenantId, sessionId)).toEqual(first);
    const after = await s.ledger.balance(t.tenantId);
    expect(after.balanceCreditMicros).toBe(balance.balanceCreditMicros);
    expect(after.lifetimeUsedCreditMicros).toBe(1 * SEC);
  });

  it('concurrent finishes of one session charge it once', async () => {
    const t = await tenantWith(20);
    const { sessionId } = await s.usage.open(openInput(t));
    await s.usage.start(sessionId);
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        s.usage.finish(sessionId, { status: 'released', billableMs: 1_000 * (i + 1) }),
      ),
    );
    const billed = new Set(results.map((r) => r?.billedCreditMicros));
    expect(billed.size).toBe(1);
    const [charge] = [...billed];
    expect((await s.ledger.balance(t.tenantId)).lifetimeUsedCreditMicros).toBe(charge);
  });

  it('finish of an unknown session is undefined', async () => {
    expect(await s.usage.finish('ses_unknown', { status: 'released', billableMs: 1 })).toBeUndefined();
  });

  it('a session whose reservation the janitor already charged is never recorded as failed with a charge', async () => {
    const t = await tenantWith(20);
    const { sessionId, reservationId } = await s.usage.open(openInput(t));
    await s.usage.start(sessionId);
    await s.ledger.reportProgress(reservationId, 2 * SEC);
    await s.sql`update credit_reservations set expires_at = now() - interval '1 second' where id = ${reservationId}`;
    expect(await s.ledger.expireDue()).toContain(reservationId);
    // The holder comes back and reports a failure before the janitor closed the session row.
    const done = await s.usage.finish(sessionId, { status: 'failed', billableMs: 0 });
    expect(done?.billedCreditMicros).toBe(2 * SEC);
    expect(done?.status).toBe('released');
    expect(done?.billableSeconds).toBe(2);
    expect((await s.ledger.balance(t.tenantId)).balanceCreditMicros).toBe(18 * SEC);
  });
});

describe('UsageStore.list', () => {
  const all = { from: new Date(Date.now() - 10 * DAY), to: new Date(Date.now() + DAY) };

  async function pages(tenantId: string, q: { endUserId?: string; limit: number; window?: { from: Date; to: Date } }) {
    const seen: SessionUsage[][] = [];
    let after: { createdAt: Date; id: string } | undefined;
    for (let i = 0; i < 50; i++) {
      const page = await s.usage.list(tenantId, {
        window: q.window ?? all,
        endUserId: q.endUserId,
        after,
        limit: q.limit,
      });
      seen.push(page.data);
      if (page.nextCursor === null) return seen;
      expect(page.data).toHaveLength(q.limit);
      after = decodeCursor(page.nextCursor);
      expect(after).toBeDefined();
    }
    throw new Error('paging did not end');
  }

  function expectNewestFirst(rows: SessionUsage[]): void {
    for (let i = 1; i < rows.length; i++) {
      const a = rows[i - 1]!;
      const b = rows[i]!;
      expect(a.createdAt >= b.createdAt, `${a.createdAt} before ${b.createdAt}`).toBe(true);
    }
  }

  it('pages newest first with nextCursor until null, each row exactly once, never another tenant’s rows', async () => {
    const a = await tenantWith(100);
    const b = await tenantWith(100);
    const mine: string[] = [];
    for (let i = 0; i < 7; i++) {
      const { sessionId } = await s.usage.open(
        openInput(a, { reserveCreditMicros: SEC, endUserId: i % 2 ? 'u-odd' : 'u-even' }),
      );
      mine.push(sessionId);
      await s.usage.open(openInput(b, { reserveCreditMicros: SEC, endUserId: 'u-odd' }));
    }
    const got = await pages(a.tenantId, { limit: 3 });
    expect(got.map((p) => p.length)).toEqual([3, 3, 1]);
    const rows = got.flat();
    expectNewestFirst(rows);
    expect(rows.map((r) => r.sessionId).sort()).toEqual([...mine].sort());
    expect(new Set(rows.map((r) => r.sessionId)).size).toBe(7);
    // Newest first: the last opened comes first.
    expect(rows[0]!.sessionId).toBe(mine[6]);
    expect(rows[6]!.sessionId).toBe(mine[0]);
  });

  it('returns an exact last page with nextCursor null', async () => {
    const a = await tenantWith(100);
    for (let i = 0; i < 4; i++) await s.usage.open(openInput(a, { reserveCreditMicros: SEC }));
    const first = await s.usage.list(a.tenantId, { window: all, limit: 4 });
    expect(first.data).toHaveLength(4);
    expect(first.nextCursor).toBeNull();
  });

  it('pages sessions created in the same instant without losing or repeating any', async () => {
    const a = await tenantWith(100);
    // One transaction: every row gets the same created_at.
    const ids = await s.sql.begin(async (tx) => {
      const out: string[] = [];
      for (let i = 0; i < 5; i++)
        out.push((await s.usage.open(openInput(a, { reserveCreditMicros: SEC }), tx)).sessionId);
      return out;
    });
    const rows = (await pages(a.tenantId, { limit: 2 })).flat();
    expect(rows.map((r) => r.sessionId).sort()).toEqual([...ids].sort());
  });

  it('filters by endUserId', async () => {
    const a = await tenantWith(100);
    const odd: string[] = [];
    for (let i = 0; i < 6; i++) {
      const { sessionId } = await s.usage.open(
        openInput(a, { reserveCreditMicros: SEC, endUserId: i % 2 ? 'u-odd' : 'u-even' }),
      );
      if (i % 2) odd.push(sessionId);
    }
    await s.usage.open(openInput(a, { reserveCreditMicros: SEC }));
    const rows = (await pages(a.tenantId, { endUserId: 'u-odd', limit: 2 })).flat();
    expect(rows.map((r) => r.sessionId).sort()).toEqual([...odd].sort());
    expect(rows.every((r) => r.endUserId === 'u-odd')).toBe(true);
    expect((await pages(a.tenantId, { endUserId: 'nobody', limit: 2 })).flat()).toEqual([]);
  });

  it('respects the window: rows created outside it are not listed', async () => {
    const a = await tenantWith(100);
    const old = await s.usage.open(openInput(a, { reserveCreditMicros: SEC }));
    const recent = await s.usage.open(openInput(a, { reserveCreditMicros: SEC }));
    await s.sql`update session_usage set created_at = now() - interval '40 days' where id = ${old.sessionId}`;

    const byDefault = await s.usage.list(a.tenantId, { window: effectiveWindow(), limit: 10 });
    expect(byDefault.data.map((r) => r.sessionId)).toEqual([recent.sessionId]);

    const wide = effectiveWindow(new Date(Date.now() - 60 * DAY), new Date(Date.now() + 1000));
    const both = await s.usage.list(a.tenantId, { window: wide, limit: 10 });
    expect(both.data.map((r) => r.sessionId)).toEqual([recent.sessionId, old.sessionId]);

    const onlyOld = { from: new Date(Date.now() - 41 * DAY), to: new Date(Date.now() - 39 * DAY) };
    const past = await s.usage.list(a.tenantId, { window: onlyOld, limit: 10 });
    expect(past.data.map((r) => r.sessionId)).toEqual([old.sessionId]);
  });

  it('get does not return another tenant’s session', async () => {
    const a = await tenantWith(10);
    const b = await tenantWith(10);
    const { sessionId } = await s.usage.open(openInput(a, { reserveCreditMicros: SEC }));
    expect(await s.usage.get(b.tenantId, sessionId)).toBeUndefined();
    expect(await s.usage.get(a.tenantId, sessionId)).toBeDefined();
  });
});
