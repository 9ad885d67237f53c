/**
 * What the agent worker's end-to-end tests share: the API as a customer reaches it (its own
 * database, served on a real port, LiveKit's webhooks reaching it), a tenant with credits and a
 * ready avatar, a local OpenAI-compatible server standing in for the paid STT and LLM, real agent
 * worker processes (`npm run agent`) on the same database and LiveKit server, and calls minted over
 * HTTP with a user joining them.
 */
import { AudioSource, LocalAudioTrack, TrackPublishOptions, TrackSource } from '@livekit/rtc-node';
import { RoomServiceClient } from 'livekit-server-sdk';
import { expect } from 'vitest';
import { runJanitorOnce } from '../api/janitor.ts';
import { LIVEKIT_WEBHOOK_PATH } from '../api/routes/webhooks/livekit.ts';
import { Microphone, Viewer, startWorkerProcess, type WorkerProcess } from '../agent/test-support.ts';
import { startFakeOpenAI, type FakeOpenAI } from './fakes/openai.ts';
import { LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET } from './deps.ts';
import type { LiveSession } from '../core/live/sessions.ts';
import type { SessionUsage } from '../core/usage.ts';
import { json, testApi, waitFor, type TestApi } from './helpers.ts';
import { checkLedgerInvariants } from './ledger-invariants.ts';
import { liveKitEnv, receiveLiveKitWebhooks } from './livekit.ts';
import { readyAvatar, type ReadyAvatarOptions } from './realtime.ts';

export const MINT = '/api/v1/realtime/livekit/session';
export const RELEASE = '/api/v1/realtime/livekit/session/release';

/** The mint's answer, as a customer reads it. */
export interface Grant {
  session_id: string;
  room_name: string;
  server_url: string;
  participant_token: string;
  participant_identity: string;
  avatar_identity: string;
}

export interface AgentHarnessOptions {
  /**
   * A LiveKit server of the test file's own (a fixed URL, known before it starts): it must post its
   * webhooks to the harness's `webhookUrl`. Default: the test run's server, its webhooks relayed.
   */
  livekitUrl?: string;
  avatar?: Pick<ReadyAvatarOptions, 'displayName' | 'personality' | 'loop'>;
  /** The workspace may record its calls. */
  recordings?: boolean;
  /** More env of the API and the workers alike (settings both sides read, e.g. LIVE_HEARTBEAT_TIMEOUT_SECONDS). */
  env?: Record<string, string>;
}

export interface AgentHarness {
  t: TestApi;
  fake: FakeOpenAI;
  tenantId: string;
  apiKey: string;
  apiKeyId: string;
  avatarId: string;
  /** The API on its real port (the AvatarSession plugin reaches it there). */
  apiUrl: string;
  /** Where LiveKit must post its webhooks for this API. */
  webhookUrl: string;
  livekitUrl: string;
  rooms: RoomServiceClient;
  /** The env of the API and the workers (LiveKit, the fake OpenAI endpoint, the agent name). */
  env: Record<string, string>;
  /** While true, LiveKit's webhooks are refused (503): the API misses them, as when it is down or unreachable. */
  webhooksLost: boolean;
  /** Starts an agent worker process (`npm run agent`) on the API's database; resolves once it is registered and declares its slots. */
  startWorker(extraEnv?: Record<string, string>): Promise<WorkerProcess>;
  /** A call as a customer starts it: POST the mint (200 expected). */
  mintCall(body?: Record<string, unknown>): Promise<Grant>;
  /** The user joins with the mint's token, watching the avatar, with a microphone. */
  joinAsUser(grant: Grant): Promise<{ viewer: Viewer; mic: Microphone }>;
  /**
   * Waits for the call to be over and its usage settled, then checks it was settled exactly once:
   * the usage released or failed, its credit reservation closed by one settlement (one usage row
   * in the ledger when it billed anything, of what the usage says), the ledger's invariants, and
   * the call's capacity slot freed.
   */
  settledOnce(sessionId: string): Promise<{ session: LiveSession; usage: SessionUsage }>;
  /** One pass of the API's janitor (api/janitor.ts), as its timer runs it. */
  janitorPass(): ReturnType<typeof runJanitorOnce>;
  /** Ends the calls still open (after a failed test), but those of `keep`, and deletes their rooms. */
  endOpenCalls(keep?: string[]): Promise<void>;
  /** Stops the workers still running, the API and the fake. */
  close(): Promise<void>;
}

export async function startAgentHarness(o: AgentHarnessOptions = {}): Promise<AgentHarness> {
  const fake = await startFakeOpenAI();
  const ownServer = o.livekitUrl !== undefined;
  const base = liveKitEnv();
  const env = {
    ...base,
    ...(ownServer ? { LIVEKIT_URL: o.livekitUrl! } : {}),
    OPENAI_BASE_URL: fake.baseUrl,
    OPENAI_API_KEY: 'test-key',
    ...o.env,
  };
  const t = await testApi({ env });
  const webhooks = { lost: false };
  const serve: typeof t.app.fetch = (req, ...rest) =>
    webhooks.lost && new URL(req.url).pathname === LIVEKIT_WEBHOOK_PATH
      ? new Response('unavailable', { status: 503 })
      : t.app.fetch(req, ...rest);
  // The run's server reaches this API through the relay; a server of the file's own posts to it directly.
  const api = await receiveLiveKitWebhooks(serve, { relayed: !ownServer });
  const { tenantId, apiKey, apiKeyId } = await t.newTenant({ credits: 3600 });
  if (o.recordings) await t.services.sql`update tenants set recordings_enabled = true where id = ${tenantId}`;
  const { avatarId } = await readyAvatar(t, tenantId, o.avatar ?? {});
  const livekitUrl = env.LIVEKIT_URL!;
  const rooms = new RoomServiceClient(livekitUrl.replace(/^ws/, 'http'), LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET);
  const workers: WorkerProcess[] = [];

  const startWorker = async (extraEnv: Record<string, string> = {}) => {
    const worker = await startWorkerProcess({
      ...env,
      DATABASE_URL: t.services.dbUrl,
      DATA_DIR: t.services.config.dataDir,
      LOG_LEVEL: 'info',
      STT_MODEL: 'fake-stt',
      LLM_MODEL: 'fake-llm',
      USER_JOIN_TIMEOUT_SECONDS: '60',
      AGENT_DRAIN_SECONDS: '5',
      ...extraEnv,
    });
    workers.push(worker);
    // The worker declares its slots in the database: the mint's capacity comes from there.
    await waitFor("the worker's slots", async () =>
      (await t.services.capacity.snapshot('primary')).slots > 0 ? true : undefined,
    );
    return worker;
  };

  const mintCall = async (body: Record<string, unknown> = {}) => {
    const res = await t.request('POST', MINT, { key: apiKey, body: { avatar_id: avatarId, ...body } });
    expect(res.status, await res.clone().text()).toBe(200);
    return json<Grant>(res);
  };

  const joinAsUser = async (grant: Grant) => {
    const viewer = new Viewer(grant.avatar_identity);
    await viewer.connect(grant.server_url, grant.participant_token);
    const micSource = new AudioSource(16_000, 1, 100);
    await viewer.room.localParticipant!.publishTrack(
      LocalAudioTrack.createAudioTrack('mic', micSource),
      new TrackPublishOptions({ source: TrackSource.SOURCE_MICROPHONE }),
    );
    return { viewer, mic: new Microphone(micSource, 16_000) };
  };

  const settledOnce = async (sessionId: string) => {
    const { sql } = t.services;
    const usage = await waitFor(`the settled usage of ${sessionId}`, async () => {
      const u = await t.services.usage.get(tenantId, sessionId);
      return u?.status === 'released' || u?.status === 'failed' ? u : undefined;
    });
    const session = (await t.services.liveSessions.get(sessionId))!;
    expect(session.state).toBe('ended');
    const [r] = await sql<{ status: string; settled: number | null; usage_rows: number; usage_sum: number }[]>`
      select r.status, r.settled_credit_micros::bigint as settled,
             (select count(*)::int from credit_ledger l where l.reservation_id = r.id) as usage_rows,
             (select coalesce(-sum(amount_credit_micros), 0)::bigint from credit_ledger l where l.reservation_id = r.id and l.kind = 'usage') as usage_sum
      from session_usage u join credit_reservations r on r.id = u.reservation_id where u.id = ${sessionId}`;
    expect(r, 'the reservation, settled (not open, not expired)').toMatchObject({
      status: 'settled',
      settled: usage.billedCreditMicros,
    });
    expect(r!.usage_rows, 'ledger rows of the reservation').toBe(usage.billedCreditMicros > 0 ? 1 : 0);
    expect(r!.usage_sum).toBe(usage.billedCreditMicros);
    await checkLedgerInvariants(sql, [tenantId], [apiKeyId]);
    const pool = session.capacityPool;
    await waitFor(`the slot of ${sessionId} to be freed`, async () =>
      (await t.services.capacity.coordinator.holders(pool)).some((x) => x.holder === sessionId) ? undefined : true,
    );
    return { session, usage };
  };

  const endOpenCalls = async (keep: string[] = []) => {
    const open = await t.services.sql<
      { id: string; room_name: string }[]
    >`select id, room_name from live_sessions where state <> 'ended' and not (id = any(${keep}))`;
    for (const s of open) {
      await t.services.liveSessions.end(s.id, 'manual');
      await rooms.deleteRoom(s.room_name).catch(() => {});
    }
  };

  return {
    get webhooksLost() {
      return webhooks.lost;
    },
    set webhooksLost(lost: boolean) {
      webhooks.lost = lost;
    },
    t,
    fake,
    tenantId,
    apiKey,
    apiKeyId,
    avatarId,
    apiUrl: api.url,
    webhookUrl: `${api.url}${LIVEKIT_WEBHOOK_PATH}`,
    livekitUrl,
    rooms,
    env,
    startWorker,
    mintCall,
    joinAsUser,
    settledOnce,
    janitorPass: () => runJanitorOnce(t.services),
    endOpenCalls,
    close: async () => {
      for (const w of workers) await w.stop();
      await api.stop();
      await fake.close();
      await t.close();
    },
  };
}
