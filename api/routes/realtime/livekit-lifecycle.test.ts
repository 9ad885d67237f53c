import { createHash } from 'node:crypto';
import { AudioSource, LocalAudioTrack, Room, TrackPublishOptions, TrackSource } from '@livekit/rtc-node';
import { AccessToken, RoomServiceClient } from 'livekit-server-sdk';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { MICROS_PER_SECOND } from '../../../core/credits/ledger.ts';
import { SLOT_RECONCILE_GRACE_MS } from '../../../core/live/capacity.ts';
import { LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET } from '../../../test/deps.ts';
import { json, testApi, waitFor } from '../../../test/helpers.ts';
import { checkLedgerInvariants } from '../../../test/ledger-invariants.ts';
import { liveKitEnv, receiveLiveKitWebhooks } from '../../../test/livekit.ts';
import { runJanitorOnce } from '../../janitor.ts';
import { MINT, readyAvatar, RELEASE, setSlots, type GrantBody } from './test-support.ts';

/**
 * A call's life after the mint: LiveKit's real webhooks (through the test run's relay) recorded as
 * connection history and ending calls; forged webhooks refused; the janitor ending abandoned calls
 * and billing them as documented; slots freed whichever way a call ends.
 */
const SEC = MICROS_PER_SECOND;
const env = liveKitEnv();
const t = await testApi({ env });
const rooms = new RoomServiceClient(inject('livekitUrl').replace(/^ws/, 'http'), LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET);
let webhooks: Awaited<ReturnType<typeof receiveLiveKitWebhooks>>;

beforeAll(async () => {
  webhooks = await receiveLiveKitWebhooks(t.app.fetch);
  await setSlots(t, 'primary', 50);
});
afterAll(async () => {
  await webhooks?.stop();
  await t.close();
});

async function call(credits = 1000, body: Record<string, unknown> = {}) {
  const w = await t.newTenant({ credits });
  const avatarId = await readyAvatar(t, w.tenantId);
  const res = await t.request('POST', MINT, { key: w.apiKey, body: { avatar_id: avatarId, ...body } });
  expect(res.status).toBe(200);
  return { ...w, avatarId, grant: await json<GrantBody>(res) };
}

const history = async (key: string, sessionId: string) =>
  t.request('GET', `/api/v1/sessions/${sessionId}/connection-history`, { key });
const events = (sessionId: string) =>
  t.services.sql<
    {
      participant_identity: string;
      role: string;
      kind: string;
      track_kind: string | null;
      track_source: string | null;
      source: string;
    }[]
  >`
    select participant_identity, role, kind, track_kind, track_source, source from connection_events where session_id = ${sessionId} order by occurred_at, id`;
const holds = async (sessionId: string) =>
  (await t.services.capacity.coordinator.holders('primary')).some((h) => h.holder === sessionId);
const slotFreed = (sessionId: string) =>
  waitFor(`the slot of ${sessionId} to be freed`, async () => ((await holds(sessionId)) ? undefined : true));

/** A webhook body signed as LiveKit signs it (or with another secret). */
async function signed(body: string, secret = LIVEKIT_DEV_SECRET, signedBody = body): Promise<string> {
  const at = new AccessToken(LIVEKIT_DEV_KEY, secret);
  at.sha256 = createHash('sha256').update(signedBody).digest('base64');
  return at.toJwt();
}

const postWebhook = (body: string, authorization?: string) =>
  t.app.request('/webhooks/livekit', {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/webhook+json', ...(authorization ? { authorization } : {}) },
  });

describe('LiveKit webhooks (real, signed by the server) on the real LiveKit server', () => {
  it("happy: records the user's join, microphone and leave as connection history; the user's leave ends the call, frees its slot and closes the room", async () => {
    const { apiKey, tenantId, grant: g } = await call();
    const user = new Room();
    await user.connect(g.server_url, g.participant_token!, { autoSubscribe: false, dynacast: false });
    const source = new AudioSource(48_000, 1);
    await user.localParticipant!.publishTrack(
      LocalAudioTrack.createAudioTrack('mic', source),
      new TrackPublishOptions({ source: TrackSource.SOURCE_MICROPHONE }),
    );
    await waitFor('the track_published webhook', async () =>
      (await events(g.session_id)).some((e) => e.kind === 'track_published') ? true : undefined,
    );
    await user.disconnect();
    await source.close();

    const ended = await waitFor('the participant_left webhook to end the call', async () => {
      const s = await t.services.liveSessions.get(g.session_id);
      return s?.state === 'ended' ? s : undefined;
    });
    expect(ended.endReason).toBe('user_left');
    await slotFreed(g.session_id);
    await waitFor('the room to be closed', async () =>
      (await rooms.listRooms([g.room_name])).length === 0 ? true : undefined,
    );
    expect(await t.services.usage.get(tenantId, g.session_id)).toMatchObject({
      status: 'failed',
      billedCreditMicros: 0,
    });

    const res = await history(apiKey, g.session_id);
    expect(res.status).toBe(200);
    const { data } = await json<{
      data: {
        participantIdentity: string;
        role: string;
        kind: string;
        trackKind: string | null;
        trackSource: string | null;
        source: string;
      }[];
    }>(res);
    const mine = data
      .filter((e) => e.participantIdentity === g.participant_identity)
      .map((e) => [e.kind, e.role, e.trackKind, e.trackSource, e.source]);
    expect(mine).toEqual([
      ['joined', 'user', null, null, 'webhook'],
      ['track_published', 'user', 'audio', 'microphone', 'webhook'],
      ...(mine.some((m) => m[0] === 'track_unpublished')
        ? [['track_unpublished', 'user', 'audio', 'microphone', 'webhook']]
        : []),
      ['left', 'user', null, null, 'webhook'],
    ]);
  });

  it('happy: room_finished ends the call; a redelivered webhook is recorded once', async () => {
    const { grant: g } = await call();
    await rooms.deleteRoom(g.room_name);
    const ended = await waitFor('room_finished to end the call', async () => {
      const s = await t.services.liveSessions.get(g.session_id);
      return s?.state === 'ended' ? s : undefined;
    });
    expect(ended.endReason).toBe('room_finished');
    await slotFreed(g.session_id);

    const body = JSON.stringify({
      event: 'participant_joined',
      id: `EV_redelivered_${g.session_id}`,
      createdAt: String(Math.floor(Date.now() / 1000)),
      room: { name: g.room_name },
      participant: { identity: 'guest-1' },
    });
    for (let i = 0; i < 2; i++) expect((await postWebhook(body, await signed(body))).status).toBe(200);
    expect((await events(g.session_id)).filter((e) => e.participant_identity === 'guest-1')).toEqual([
      {
        participant_identity: 'guest-1',
        role: 'other',
        kind: 'joined',
        track_kind: null,
        track_source: null,
        source: 'webhook',
      },
    ]);
  });

  it('security: forged webhooks (no signature, another secret, a signature of another body) are 401 and change nothing; the same event signed properly is taken', async () => {
    const { grant: g } = await call();
    const body = JSON.stringify({
      event: 'participant_left',
      id: `EV_forged_${g.session_id}`,
      createdAt: String(Math.floor(Date.now() / 1000)),
      room: { name: g.room_name },
      participant: { identity: g.participant_identity },
    });
    const forgeries: [string, string | undefined][] = [
      ['no signature', undefined],
      ['garbage', 'not-a-jwt'],
      ['another secret', await signed(body, 'another-secret')],
      ['another body', await signed(body, LIVEKIT_DEV_SECRET, `${body} `)],
    ];
    for (const [what, authorization] of forgeries) {
      const res = await postWebhook(body, authorization);
      expect(res.status, what).toBe(401);
      expect(await json(res), what).toMatchObject({ code: 'unauthorized', retryable: false });
    }
    expect((await t.services.liveSessions.get(g.session_id))?.state).toBe('pending');
    expect(await events(g.session_id)).toEqual([]);
    expect(await holds(g.session_id)).toBe(true);

    expect((await postWebhook(body, await signed(body))).status).toBe(200);
    expect(await t.services.liveSessions.get(g.session_id)).toMatchObject({ state: 'ended', endReason: 'user_left' });
    await slotFreed(g.session_id);
  });

  it('happy: a workspace with connection history off records nothing, yet its calls still end on webhooks', async () => {
    const { apiKey, tenantId, grant: g } = await call();
    await t.services.tenants.setSwitch(tenantId, 'connection_history', false);
    const user = new Room();
    await user.connect(g.server_url, g.participant_token!, { autoSubscribe: false, dynacast: false });
    await user.disconnect();
    await waitFor('the call to end', async () =>
      (await t.services.liveSessions.get(g.session_id))?.state === 'ended' ? true : undefined,
    );
    await slotFreed(g.session_id);
    expect(await json(await history(apiKey, g.session_id))).toEqual({ data: [] });
  });
});

describe('GET /sessions/{sessionId}/connection-history', () => {
  it("security: empty data for a call with no observations; 404 for another workspace's call, an unknown or malformed id, or a session that is no call", async () => {
    const a = await call();
    const b = await call();
    expect(await json(await history(a.apiKey, a.grant.session_id))).toEqual({ data: [] });
    const turn = await t.services.usage.open({
      tenantId: a.tenantId,
      apiKeyId: a.apiKeyId,
      kind: 'turn',
      reserveCreditMicros: SEC,
      ttlSeconds: 60,
    });
    for (const id of [b.grant.session_id, 'ses_unknown', 'nope', turn.sessionId]) {
      const res = await history(a.apiKey, id);
      expect(res.status, id).toBe(404);
    }
    const noScope = await t.newTenant({ scopes: ['realtime:write'] });
    expect((await history(noScope.apiKey, a.grant.session_id)).status).toBe(403);
    await t.services.usage.finish(turn.sessionId, { status: 'failed', billableMs: 0 });
  });
});

describe('the janitor ends abandoned calls', () => {
  it('happy: worker lost (no heartbeat for 60 s): ended worker_lost, billed up to its last heartbeat; never joined: failed, 0; past its maximum: max_duration, billed exactly it', async () => {
    const live = t.services.liveSessions;
    const lost = await call(1000, { max_duration_seconds: 600 });
    const unjoined = await call(1000);
    const overdue = await call(1000, { max_duration_seconds: 60 });
    const healthy = await call(1000, { max_duration_seconds: 600 });
    for (const c of [lost, overdue, healthy]) {
      await live.claim(c.grant.session_id, 'wrk_gone');
      await live.joined(c.grant.session_id);
      await live.started(c.grant.session_id, new Date());
    }
    // Move time back instead of waiting: started 120 s ago, last heard of 61 s ago.
    await t.services
      .sql`update live_sessions set started_at = now() - interval '120 seconds', last_heartbeat_at = now() - interval '61 seconds' where id = ${lost.grant.session_id}`;
    await t.services
      .sql`update live_sessions set started_at = now() - interval '100 seconds', last_heartbeat_at = now() where id = ${overdue.grant.session_id}`;
    await t.services
      .sql`update live_sessions set created_at = now() - make_interval(secs => ${t.services.config.LIVE_JOIN_TIMEOUT_SECONDS + 1}) where id = ${unjoined.grant.session_id}`;

    const pass = await runJanitorOnce(t.services);
    expect(pass.liveEnded).toBe(3);
    expect(await live.get(lost.grant.session_id)).toMatchObject({ state: 'ended', endReason: 'worker_lost' });
    expect(await t.services.usage.get(lost.tenantId, lost.grant.session_id)).toMatchObject({
      status: 'released',
      billedCreditMicros: 59 * SEC,
    });
    expect(await live.get(unjoined.grant.session_id)).toMatchObject({ state: 'ended', endReason: 'failed' });
    expect(await t.services.usage.get(unjoined.tenantId, unjoined.grant.session_id)).toMatchObject({
      status: 'failed',
      billedCreditMicros: 0,
    });
    expect(await live.get(overdue.grant.session_id)).toMatchObject({ state: 'ended', endReason: 'max_duration' });
    expect(await t.services.usage.get(overdue.tenantId, overdue.grant.session_id)).toMatchObject({
      status: 'released',
      billedCreditMicros: 60 * SEC,
    });
    expect((await live.get(healthy.grant.session_id))?.state).toBe('active');
    for (const c of [lost, unjoined, overdue]) {
      await slotFreed(c.grant.session_id);
      expect(await rooms.listRooms([c.grant.room_name])).toEqual([]);
      await checkLedgerInvariants(t.services.sql, [c.tenantId], [c.apiKeyId]);
    }
    // A second pass (another process's janitor) changes nothing.
    expect((await runJanitorOnce(t.services)).liveEnded).toBe(0);
    const released = await t.request('POST', RELEASE, {
      key: healthy.apiKey,
      body: { session_id: healthy.grant.session_id, reason: 'disconnected' },
    });
    expect(await json(released)).toMatchObject({ usage_status: 'released', end_reason: 'disconnected' });
  });

  it('happy: frees a slot whose call is ended or missing once its grace has passed (a lost notify, a process killed mid-mint), not a fresh one', async () => {
    const coordinator = t.services.capacity.coordinator;
    // A mint killed between taking its slot and writing its session: the slot has no session.
    await coordinator.acquire({
      pool: 'primary',
      slots: 50,
      holder: 'ses_killedmidmint',
      tenantId: 'ten_x',
      enqueue: false,
    });
    // A call whose end notify was lost: ended in the database while this process was not listening.
    const { grant: g } = await call();
    await t.services.capacity.close();
    try {
      await t.services.liveSessions.end(g.session_id, 'released');
      expect(await holds(g.session_id)).toBe(true);
      expect(await t.services.capacity.reconcile()).toBe(0);
      expect(
        await t.services.capacity.reconcile(SLOT_RECONCILE_GRACE_MS, Date.now() + SLOT_RECONCILE_GRACE_MS + 1000),
      ).toBe(2);
      expect(await holds(g.session_id)).toBe(false);
      expect(await holds('ses_killedmidmint')).toBe(false);
    } finally {
      await t.services.capacity.listen();
    }
  });
});
