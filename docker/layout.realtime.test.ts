import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { initializeLogger } from '@livekit/agents';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Viewer, startWorkerProcess, type WorkerProcess } from '../agent/test-support.ts';
import { LIVEKIT_WEBHOOK_PATH } from '../api/routes/webhooks/livekit.ts';
import { MICROS_PER_SECOND } from '../core/credits/ledger.ts';
import { randomBase62 } from '../core/platform/ids.ts';
import type { Services } from '../core/wiring/services.ts';
import { MINT, RELEASE, type Grant } from '../test/agent-harness.ts';
import { freePort } from '../test/deps.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../test/fakes/openai.ts';
import { freshDatabase, testServices, waitFor } from '../test/helpers.ts';
import { liveKitEnv, relayWebhooksTo } from '../test/livekit.ts';
import { startEntryPoint, type EntryPoint } from '../test/processes.ts';
import { readyAvatar } from '../test/realtime.ts';

/**
 * The layout of docker/compose.yaml run as plain processes (no Docker engine runs in CI): two API
 * processes (`api/main.ts`) and two agent workers (`agent/main.ts`) on one PostgreSQL database, one
 * Redis, one LiveKit server and one shared DATA_DIR (compose's `media` volume), LiveKit's webhooks
 * reaching the API processes in turn (as compose's `http://api:8080` reaches one replica or the
 * other). Calls are minted through either API process, the capacity queue is one for both, calls
 * land on both workers, and a worker stopped with SIGTERM (what `docker compose stop` and a rolling
 * update send) lets its call finish while the other worker goes on serving.
 *
 * Kept cheap for a 2-core machine: one slot per worker, a 2 s loop of 256 px, three short calls,
 * viewers that only count frames, no speech.
 */
initializeLogger({ pretty: false, level: 'warn' });

interface Api {
  process: EntryPoint;
  base: string;
}

let db: Awaited<ReturnType<typeof freshDatabase>>;
let services: Services;
let fake: FakeOpenAI;
let dataDir: string;
let apis: Api[] = [];
const workers: WorkerProcess[] = [];
/** Starts an agent worker (one call slot) on the shared configuration; resolves once it is registered. */
let startWorker: () => Promise<WorkerProcess>;
let balancer: http.Server;
let relayed: { stop(): Promise<void> } | undefined;
let apiKey: string;
let avatarId: string;
const viewers: Viewer[] = [];

beforeAll(async () => {
  db = await freshDatabase();
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'avatar-layout-'));
  fake = await startFakeOpenAI();
  // What compose's x-app-env gives every process. The metrics and health listeners get ports of
  // their own (0: any free one): four processes share this machine, where compose gives each its host.
  const shared = {
    ...liveKitEnv(),
    DATABASE_URL: db.url,
    REDIS_URL: inject('redisUrl'),
    DATA_DIR: dataDir,
    MEDIA_SIGNING_SECRET: randomBase62(32),
    OPENAI_BASE_URL: fake.baseUrl,
    OPENAI_API_KEY: 'test-key',
    STT_MODEL: 'fake-stt',
    LLM_MODEL: 'fake-llm',
    LOG_LEVEL: 'info',
    METRICS_PORT: '0',
    AGENT_METRICS_PORT: '0',
    AGENT_HEALTH_PORT: '0',
    // The first queue ticket is sent back after a drain and two calls' ends: minutes on a busy machine.
    QUEUE_TICKET_TTL_SECONDS: '600',
  };
  services = await testServices({ database: db, redis: true, env: shared });
  const tenant = await services.tenants.create('layout');
  await services.ledger.grant(tenant.id, 3600 * MICROS_PER_SECOND);
  apiKey = (await services.keys.create({ tenantId: tenant.id, name: 'layout', scopes: ['*'] })).apiKey;
  // Stored in the shared DATA_DIR, where the workers read the loop's frames.
  avatarId = (await readyAvatar({ services }, tenant.id, { displayName: 'Layout' })).avatarId;

  const started = await Promise.all(
    [0, 1].map(async () => {
      const port = await freePort();
      const p = startEntryPoint('api/main.ts', { ...shared, PORT: String(port), HOST: '127.0.0.1', JOB_WORKERS: '0' });
      await p.logged('api listening');
      return { process: p, base: `http://127.0.0.1:${port}` };
    }),
  );
  apis = started;
  // LiveKit's webhooks to one API process, then the other.
  let next = 0;
  balancer = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const target = apis[next++ % apis.length]!;
      fetch(`${target.base}${LIVEKIT_WEBHOOK_PATH}`, {
        method: 'POST',
        headers: {
          'content-type': String(req.headers['content-type'] ?? 'application/webhook+json'),
          authorization: String(req.headers.authorization ?? ''),
        },
        body: Buffer.concat(chunks),
      }).then(
        async (r) => res.writeHead(r.status).end(await r.text()),
        () => res.writeHead(502).end(),
      );
    });
  });
  await new Promise<void>((resolve) => balancer.listen(0, '127.0.0.1', resolve));
  relayed = await relayWebhooksTo(`http://127.0.0.1:${(balancer.address() as { port: number }).port}`);

  startWorker = async () => {
    const worker = await startWorkerProcess({
      ...shared,
      AGENT_SLOTS: '1',
      AGENT_LIPSYNC_THREADS: '1',
      AGENT_DRAIN_SECONDS: '120',
      USER_JOIN_TIMEOUT_SECONDS: '60',
    });
    workers.push(worker);
    return worker;
  };
  await Promise.all([startWorker(), startWorker()]);
}, 240_000);

afterAll(async () => {
  for (const v of viewers) await v.leave().catch(() => {});
  for (const w of workers) await w.stop();
  for (const a of apis) {
    a.process.child.kill('SIGTERM');
    await a.process.exited;
  }
  await relayed?.stop();
  await new Promise((r) => balancer?.close(r));
  await fake?.close();
  await services?.close();
  await db?.drop();
  rmSync(dataDir, { recursive: true, force: true });
}, 120_000);

async function post(api: Api, url: string, body: Record<string, unknown>): Promise<{ status: number; body: never }> {
  const res = await fetch(`${api.base}${url}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as never };
}

const capacity = async (api: Api) =>
  (await (
    await fetch(`${api.base}/api/v1/realtime/livekit/capacity`, { headers: { authorization: `Bearer ${apiKey}` } })
  ).json()) as { slots: number; in_use: number; queue_size: number; workers: number };

/** A mint through `api` answered 200, and the user joined, watching the avatar until its video flows. */
async function call(api: Api, extra: Record<string, unknown> = {}): Promise<{ grant: Grant; viewer: Viewer }> {
  const minted = await post(api, MINT, { avatar_id: avatarId, max_duration_seconds: 300, ...extra });
  expect(minted.status, JSON.stringify(minted.body)).toBe(200);
  const grant = minted.body as Grant;
  const viewer = new Viewer(grant.avatar_identity, { timingOnly: true });
  viewers.push(viewer);
  await viewer.connect(grant.server_url, grant.participant_token);
  await waitFor(
    () => `the avatar's video of ${grant.session_id}; ${diagnosis()}`,
    () => (viewer.frames.length > 25 ? true : undefined),
    { timeoutMs: 90_000 },
  );
  return { grant, viewer };
}

/** The worker (by its id in the database) running a call. */
async function workerOf(sessionId: string): Promise<string> {
  return (await services.liveSessions.get(sessionId))!.workerId!;
}

/** A worker process's id, from its start-up line (its log may come after its `ready` message). */
function idOf(w: WorkerProcess): Promise<string> {
  return waitFor(`the registration line of worker ${w.pid}`, () => {
    const line = w
      .logs()
      .split('\n')
      .find((l) => l.includes('"msg":"agent worker registered"'));
    return /"workerId":"([^"]+)"/.exec(line ?? '')?.[1];
  });
}

const framesSince = (v: Viewer, since: number) => v.frames.filter((f) => f.at > since).length;

function diagnosis(): string {
  return [
    ...workers.map((w, i) => `worker ${i}:\n${w.diagnosis(1500)}`),
    ...apis.map((a, i) => `api ${i}:\n${a.process.output().slice(-1500)}`),
  ].join('\n');
}

async function ended(sessionId: string) {
  return waitFor(`the end of ${sessionId}`, async () => {
    const session = await services.liveSessions.get(sessionId);
    if (session?.state !== 'ended') return undefined;
    const usage = await services.usage.get(session.tenantId, sessionId);
    return usage?.status === 'released' || usage?.status === 'failed' ? { session, usage } : undefined;
  });
}

describe('the compose layout as processes: two API processes, two agent workers, one PostgreSQL, Redis and LiveKit', () => {
  it(
    'mints through either API process onto either worker, queues in one capacity queue for both, and goes on serving while a worker drains',
    { timeout: 420_000 },
    async () => {
      const [a, b] = apis as [Api, Api];
      // Both API processes count both workers' slots.
      for (const api of apis)
        await waitFor('both workers in the capacity of each API process', async () => {
          const c = await capacity(api);
          return c.workers === 2 && c.slots === 2 ? c : undefined;
        });

      // A call through each API process: one on each worker (one slot each).
      const first = await call(a);
      const second = await call(b);
      const [w1, w2] = [await workerOf(first.grant.session_id), await workerOf(second.grant.session_id)];
      expect(new Set([w1, w2]).size, 'the two calls run on two workers').toBe(2);
      const ids = await Promise.all(workers.map(idOf));
      expect(new Set(ids)).toEqual(new Set([w1, w2]));

      // Full: a mint through A queues first, one through B second, and B knows A's ticket's place.
      const queuedA = await post(a, MINT, { avatar_id: avatarId });
      expect(queuedA.status).toBe(429);
      const ticket = (queuedA.body as { queue_ticket_id: string; queue_size: number }).queue_ticket_id;
      expect(queuedA.body).toMatchObject({ queue_size: 1 });
      const queuedB = await post(b, MINT, { avatar_id: avatarId });
      expect(queuedB.status).toBe(429);
      expect(queuedB.body).toMatchObject({ queue_size: 2 });
      const again = await post(b, MINT, { avatar_id: avatarId, queue_ticket_id: ticket });
      expect(again.status).toBe(429);
      expect(again.body).toMatchObject({ queue_ticket_id: ticket, queue_size: 1 });
      // The second ticket leaves the queue through A.
      const left = await post(a, RELEASE, {
        queue_ticket_id: (queuedB.body as { queue_ticket_id: string }).queue_ticket_id,
      });
      expect(left).toMatchObject({ status: 200, body: { state: 'left_queue' } });
      expect(await capacity(b)).toMatchObject({ queue_size: 1, in_use: 2 });

      // The first call's worker is stopped (SIGTERM): it drains. It takes no new call (the API
      // processes count it out), and its call goes on, as does the other worker's.
      const draining = workers[ids.indexOf(w1)]!;
      const serving = workers[ids.indexOf(w2)]!;
      const stoppedAt = performance.now();
      const exit = draining.stop('SIGTERM');
      await waitFor('the draining worker out of the capacity', async () => {
        const [ca, cb] = [await capacity(a), await capacity(b)];
        return ca.workers === 1 && cb.workers === 1 && ca.slots === 1 ? true : undefined;
      });
      await waitFor(
        () => `both calls' video flowing after the drain began; ${diagnosis()}`,
        () =>
          framesSince(first.viewer, stoppedAt) > 50 && framesSince(second.viewer, stoppedAt) > 50 ? true : undefined,
        { timeoutMs: 60_000 },
      );

      // The user of the draining worker's call leaves: the call ends as the user's, and the worker,
      // with no call left, leaves and exits cleanly.
      await first.viewer.leave();
      expect((await ended(first.grant.session_id)).session.endReason).toBe('user_left');
      expect(await exit, `the drained worker's exit code; ${draining.diagnosis(2000)}`).toBe(0);
      const framesBefore = second.viewer.frames.length;
      await waitFor(
        () => `the other worker's call still flowing; ${serving.diagnosis(2000)}`,
        () => (second.viewer.frames.length > framesBefore + 25 ? true : undefined),
        { timeoutMs: 30_000 },
      );

      // A new worker replaces the drained one (a rolling update: `--scale agent=2` with the new
      // image): both API processes count its slot, and the queued ticket, sent back through B, gets
      // it, while the second call goes on.
      const replacement = await startWorker();
      const w3 = await idOf(replacement);
      await waitFor('the new worker in the capacity', async () => ((await capacity(a)).slots === 2 ? true : undefined));
      const third = await call(b, { queue_ticket_id: ticket });
      expect(await workerOf(third.grant.session_id)).toBe(w3);
      const framesNow = second.viewer.frames.length;
      await waitFor(
        () => `the second call still flowing while the third starts; ${serving.diagnosis(1500)}`,
        () => (second.viewer.frames.length > framesNow + 25 ? true : undefined),
        { timeoutMs: 30_000 },
      );
      const released = await post(a, RELEASE, { session_id: third.grant.session_id });
      expect(released.status).toBe(200);
      await third.viewer.leave();
      const { usage } = await ended(third.grant.session_id);
      expect(usage.status).toBe('released');
      await second.viewer.leave();
      expect((await ended(second.grant.session_id)).session.endReason).toBe('user_left');
      // Nothing went wrong in any process.
      for (const [i, w] of workers.entries())
        expect(
          w
            .logs()
            .split('\n')
            .filter((l) => /"level":(50|60)/.test(l)),
          `worker ${i}`,
        ).toEqual([]);
      for (const [i, api] of apis.entries())
        expect(
          api.process.lines.filter((l) => (l.record?.level ?? 0) >= 50).map((l) => l.text),
          `api ${i}`,
        ).toEqual([]);
    },
  );
});
