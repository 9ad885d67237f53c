import { afterAll, describe, expect, it } from 'vitest';
import { testServices } from '../../test/helpers.ts';
import { MICROS_PER_SECOND } from '../credits/ledger.ts';
import { newId } from '../platform/ids.ts';

const SEC = MICROS_PER_SECOND;
const s = await testServices();
afterAll(() => s.close());

/** A minted call (its usage row reserving 60 s, its live row pending) of a tenant holding 100 s of credits. */
async function mintedCall(): Promise<{ tenantId: string; sessionId: string }> {
  const tenant = await s.tenants.create('live session test');
  await s.ledger.grant(tenant.id, 100 * SEC);
  const avatarId = newId('avatar');
  await s.sql`insert into avatars (id, tenant_id, display_name, status) values (${avatarId}, ${tenant.id}, 'Ava', 'ready')`;
  const { sessionId } = await s.usage.open({
    tenantId: tenant.id,
    apiKeyId: null,
    kind: 'live',
    avatarId,
    reserveCreditMicros: 60 * SEC,
    ttlSeconds: 600,
  });
  await s.sql`
    insert into live_sessions (id, tenant_id, avatar_id, capacity_pool, mode, room_name, avatar_identity, max_duration_seconds, state)
    values (${sessionId}, ${tenant.id}, ${avatarId}, 'default', 'provider', ${`room-${sessionId}`}, ${`avatar-${sessionId}`}, 60, 'pending')`;
  return { tenantId: tenant.id, sessionId };
}

describe('LiveSessionStore.end', () => {
  it('ends a started call once: a second end changes neither its reason nor its bill', async () => {
    const { tenantId, sessionId } = await mintedCall();
    const startedAt = new Date(Date.now() - 10_000);
    await s.liveSessions.started(sessionId, startedAt);

    const first = await s.liveSessions.end(sessionId, 'user_left', new Date(startedAt.getTime() + 4_000));
    expect(first).toMatchObject({ endedNow: true, session: { state: 'ended', endReason: 'user_left' } });
    const billed = await s.usage.get(tenantId, sessionId);
    expect(billed).toMatchObject({ status: 'released', billedCreditMicros: 4 * SEC });

    const second = await s.liveSessions.end(sessionId, 'max_duration', new Date(startedAt.getTime() + 9_000));
    expect(second).toMatchObject({ endedNow: false, session: { state: 'ended', endReason: 'user_left' } });
    expect(await s.usage.get(tenantId, sessionId)).toEqual(billed);
    expect(await s.ledger.balance(tenantId)).toMatchObject({ balanceCreditMicros: 96 * SEC, reservedCreditMicros: 0 });
  });

  it('ends a call that never started as failed, billing nothing, and a second end keeps it so', async () => {
    const { tenantId, sessionId } = await mintedCall();
    expect(await s.liveSessions.end(sessionId, 'user_never_joined')).toMatchObject({ endedNow: true });
    expect(await s.liveSessions.end(sessionId, 'released')).toMatchObject({
      endedNow: false,
      session: { endReason: 'user_never_joined' },
    });
    expect(await s.usage.get(tenantId, sessionId)).toMatchObject({ status: 'failed', billedCreditMicros: 0 });
    expect(await s.ledger.balance(tenantId)).toMatchObject({ balanceCreditMicros: 100 * SEC, reservedCreditMicros: 0 });
  });

  it('lets exactly one of two simultaneous ends end the call', async () => {
    const { sessionId } = await mintedCall();
    await s.liveSessions.started(sessionId, new Date(Date.now() - 2_000));
    const both = await Promise.all([
      s.liveSessions.end(sessionId, 'released'),
      s.liveSessions.end(sessionId, 'room_closed'),
    ]);
    expect(both.filter((e) => e?.endedNow)).toHaveLength(1);
    const reason = both.find((e) => e?.endedNow)!.session.endReason;
    expect(both.map((e) => e?.session.endReason)).toEqual([reason, reason]);
  });

  it('answers undefined for a call it does not know', async () => {
    expect(await s.liveSessions.end(newId('session'), 'released')).toBeUndefined();
  });
});
