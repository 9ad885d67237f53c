import { afterAll, describe, expect, it } from 'vitest';
import { MICROS_PER_SECOND } from '../core/credits/ledger.ts';
import { testServices, waitFor } from '../test/helpers.ts';
import { runJanitorOnce, startJanitor } from './janitor.ts';

const SEC = MICROS_PER_SECOND;
const s = await testServices();
afterAll(() => s.close());

async function tenantWith(seconds: number): Promise<{ tenantId: string; apiKeyId: string }> {
  const t = await s.tenants.create('janitor test');
  await s.ledger.grant(t.id, seconds * SEC);
  const { record } = await s.keys.create({ tenantId: t.id, name: 'k', scopes: ['*'] });
  return { tenantId: t.id, apiKeyId: record.id };
}

/** A holder that opened and started a session, reported progress, then died without finishing. */
async function crashedHolder(
  t: { tenantId: string; apiKeyId: string },
  o: { reserveSeconds: number; progressSeconds: number; ttlSeconds?: number },
) {
  const opened = await s.usage.open({
    ...t,
    kind: 'live',
    avatarId: 'ava_1',
    reserveCreditMicros: o.reserveSeconds * SEC,
    ttlSeconds: o.ttlSeconds ?? 60,
  });
  await s.usage.start(opened.sessionId);
  if (o.progressSeconds > 0) await s.ledger.reportProgress(opened.reservationId, o.progressSeconds * SEC);
  return opened;
}

const expire = (reservationId: string) =>
  s.sql`update credit_reservations set expires_at = now() - interval '1 second' where id = ${reservationId}`;

async function keyRow(id: string) {
  const [k] = await s.sql<{ spent: number; reserved: number }[]>`
    select spent_credit_micros as spent, reserved_credit_micros as reserved from api_keys where id = ${id}`;
  return k!;
}

describe('janitor: crashed holders', () => {
  it('settles an expired reservation at its reported progress and records the session as released with that charge', async () => {
    const t = await tenantWith(30);
    const h = await crashedHolder(t, { reserveSeconds: 10, progressSeconds: 4.5 });
    expect((await s.ledger.balance(t.tenantId)).reservedCreditMicros).toBe(10 * SEC);
    await expire(h.reservationId);

    const { expired } = await runJanitorOnce(s);
    expect(expired).toBeGreaterThanOrEqual(1);

    const row = await s.usage.get(t.tenantId, h.sessionId);
    expect(row).toMatchObject({ status: 'released', billedCreditMicros: 4.5 * SEC, billableSeconds: 4.5 });
    expect(row?.endedAt).not.toBeNull();
    expect(await s.ledger.getReservation(h.reservationId)).toMatchObject({
      status: 'expired',
      settledCreditMicros: 4.5 * SEC,
    });
    expect(await s.ledger.balance(t.tenantId)).toMatchObject({
      balanceCreditMicros: 25.5 * SEC,
      reservedCreditMicros: 0,
      lifetimeUsedCreditMicros: 4.5 * SEC,
    });
    expect(await keyRow(t.apiKeyId)).toEqual({ spent: 4.5 * SEC, reserved: 0 });
  });

  it('records a crashed session that reported no progress as failed with 0, releasing its reservation', async () => {
    const t = await tenantWith(30);
    const h = await crashedHolder(t, { reserveSeconds: 10, progressSeconds: 0 });
    await expire(h.reservationId);
    await runJanitorOnce(s);
    expect(await s.usage.get(t.tenantId, h.sessionId)).toMatchObject({
      status: 'failed',
      billedCreditMicros: 0,
      billableSeconds: 0,
    });
    expect(await s.ledger.balance(t.tenantId)).toMatchObject({
      balanceCreditMicros: 30 * SEC,
      reservedCreditMicros: 0,
    });
    expect(await keyRow(t.apiKeyId)).toEqual({ spent: 0, reserved: 0 });
  });

  it('settles a reservation that expired on its own ttl (no SQL help), capping progress at the reservation', async () => {
    const t = await tenantWith(30);
    const h = await crashedHolder(t, { reserveSeconds: 3, progressSeconds: 9, ttlSeconds: 0.2 });
    await waitFor('the reservation to pass its expiry on the database clock', async () =>
      (await s.sql`select 1 from credit_reservations where id = ${h.reservationId} and expires_at <= now()`).length > 0
        ? true
        : undefined,
    );
    await runJanitorOnce(s);
    expect(await s.usage.get(t.tenantId, h.sessionId)).toMatchObject({
      status: 'released',
      billedCreditMicros: 3 * SEC,
    });
    expect(await s.ledger.balance(t.tenantId)).toMatchObject({
      balanceCreditMicros: 27 * SEC,
      reservedCreditMicros: 0,
    });
  });

  it('leaves live holders (unexpired reservations) alone', async () => {
    const t = await tenantWith(30);
    const h = await crashedHolder(t, { reserveSeconds: 10, progressSeconds: 2 });
    await runJanitorOnce(s);
    expect(await s.usage.get(t.tenantId, h.sessionId)).toMatchObject({ status: 'started', billedCreditMicros: 0 });
    expect(await s.ledger.balance(t.tenantId)).toMatchObject({
      balanceCreditMicros: 30 * SEC,
      reservedCreditMicros: 10 * SEC,
    });
  });

  it('does not touch sessions that already finished, and a late finish after the janitor changes nothing', async () => {
    const t = await tenantWith(30);
    const done = await crashedHolder(t, { reserveSeconds: 5, progressSeconds: 1 });
    await s.usage.finish(done.sessionId, { status: 'released', billableMs: 3_000 });
    const dead = await crashedHolder(t, { reserveSeconds: 5, progressSeconds: 2 });
    await expire(dead.reservationId);
    await runJanitorOnce(s);

    expect(await s.usage.get(t.tenantId, done.sessionId)).toMatchObject({
      status: 'released',
      billedCreditMicros: 3 * SEC,
    });
    const late = await s.usage.finish(dead.sessionId, { status: 'released', billableMs: 5_000 });
    expect(late).toMatchObject({ status: 'released', billedCreditMicros: 2 * SEC });
    expect(await s.ledger.balance(t.tenantId)).toMatchObject({
      balanceCreditMicros: 25 * SEC,
      reservedCreditMicros: 0,
    });
  });

  it('janitors running in several processes at once settle each crashed holder once', async () => {
    const t = await tenantWith(50);
    const holders = [];
    for (let i = 0; i < 5; i++) holders.push(await crashedHolder(t, { reserveSeconds: 5, progressSeconds: 1 }));
    for (const h of holders) await expire(h.reservationId);
    await Promise.all([runJanitorOnce(s), runJanitorOnce(s), runJanitorOnce(s)]);
    for (const h of holders) {
      expect(await s.usage.get(t.tenantId, h.sessionId)).toMatchObject({
        status: 'released',
        billedCreditMicros: 1 * SEC,
      });
    }
    expect(await s.ledger.balance(t.tenantId)).toMatchObject({
      balanceCreditMicros: 45 * SEC,
      reservedCreditMicros: 0,
    });
  });

  it('the periodic janitor settles a crashed holder within its interval', async () => {
    const t = await tenantWith(30);
    const h = await crashedHolder(t, { reserveSeconds: 10, progressSeconds: 1 });
    await expire(h.reservationId);
    const janitor = startJanitor(s, 50);
    try {
      await waitFor(
        'the periodic janitor to settle the holder',
        async () => ((await s.usage.get(t.tenantId, h.sessionId))?.status === 'started' ? undefined : true),
        { intervalMs: 25 },
      );
    } finally {
      await janitor.stop();
    }
    expect(await s.usage.get(t.tenantId, h.sessionId)).toMatchObject({
      status: 'released',
      billedCreditMicros: 1 * SEC,
    });
  });
});

describe('janitor crash window', () => {
  it('a session left open by a janitor that died after expiring its reservation is closed on the next pass', async () => {
    const j = await testServices();
    try {
      const tenant = await j.tenants.create('orphan');
      await j.ledger.grant(tenant.id, 10_000_000);
      const { sessionId, reservationId } = await j.usage.open({
        tenantId: tenant.id,
        apiKeyId: null,
        kind: 'live',
        reserveCreditMicros: 5_000_000,
        ttlSeconds: 60,
      });
      await j.usage.start(sessionId);
      await j.ledger.reportProgress(reservationId, 2_000_000);
      await j.sql`update credit_reservations set expires_at = now() - interval '1 second' where id = ${reservationId}`;
      // The first half of a janitor pass only: then the process "dies".
      expect(await j.ledger.expireDue()).toEqual([reservationId]);
      expect((await j.usage.get(tenant.id, sessionId))?.status).toBe('started');
      await runJanitorOnce(j);
      expect(await j.usage.get(tenant.id, sessionId)).toMatchObject({
        status: 'released',
        billedCreditMicros: 2_000_000,
      });
    } finally {
      await j.close();
    }
  });
});
