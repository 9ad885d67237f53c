import { afterAll, describe, expect, it } from 'vitest';
import { portraitAsset } from '../../api/routes/avatars/test-support.ts';
import { testApi, waitFor } from '../../test/helpers.ts';
import { startEntryPoint } from '../../test/processes.ts';
import { startJobWorkers, type RunningWorkers } from './job-workers.ts';

/**
 * Durability: a worker process killed (SIGKILL) in the middle of a render loses nothing. Its job
 * stays active in PostgreSQL until it expires, pg-boss's maintenance (in any process with a
 * started queue) puts it back for retry, and another worker finishes it.
 *
 * The expiry is an hour, far beyond any render however loaded the machine, so a live worker's job
 * never expires under it; the dead worker's job is made to outlive its expiry by moving its start
 * back (what an hour of waiting would do), and pg-boss's own maintenance does the rest.
 */
const JOB_ENV = {
  AVATAR_LOOP_SECONDS: '4',
  JOB_EXPIRE_SECONDS: '3600',
  JOB_MAINTENANCE_SECONDS: '1',
  JOB_POLL_SECONDS: '1',
  JOB_RETRY_DELAY_SECONDS: '1',
};
const t = await testApi({ env: JOB_ENV });
let workers: RunningWorkers | undefined;
afterAll(async () => {
  await workers?.stop({ timeoutMs: 2000 });
  await t.close();
});

describe('loop jobs survive a crash', () => {
  it(
    'a worker killed mid-generation: the job is retried by a new worker and the avatar becomes ready',
    { timeout: 300_000 },
    async () => {
      const { tenantId, apiKey } = await t.newTenant();
      const asset = await portraitAsset(t, tenantId);
      const created = await t.request('POST', '/api/v1/avatars', {
        key: apiKey,
        body: { displayName: 'survivor', sourceAssetId: asset },
      });
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };

      // Worker A: a separate process, as in production (core/wiring/job-worker-main.ts).
      const workerA = startEntryPoint('core/wiring/job-worker-main.ts', {
        ...JOB_ENV,
        DATABASE_URL: t.services.dbUrl,
        DATA_DIR: t.services.config.dataDir,
        LOG_LEVEL: 'warn',
        NODE_ENV: 'test',
      });
      try {
        await waitFor('worker A to start rendering', async () => {
          const [a] = await t.services.sql`select idle_video_status from avatars where id = ${id}`;
          return a!.idle_video_status === 'generating' ? true : undefined;
        });
        // Mid-generation (the job taken, the render started, nothing published): kill the worker
        // outright, so it writes no completion and no failure.
      } finally {
        workerA.child.kill('SIGKILL');
      }
      await workerA.exited;
      const [active] = await t.services
        .sql`select state, retry_count from pgboss.job where name = 'avatar-loop' and data->>'avatarId' = ${id}`;
      expect(active, workerA.output()).toMatchObject({ state: 'active', retry_count: 0 });
      const [mid] = await t.services.sql`select status, idle_video_status from avatars where id = ${id}`;
      expect(mid).toMatchObject({ status: 'preprocessing', idle_video_status: 'generating' });

      // The dead worker's job outlives its expiry: maintenance puts it back for a retry.
      await t.services
        .sql`update pgboss.job set started_on = now() - expire_in - interval '1 second' where name = 'avatar-loop' and data->>'avatarId' = ${id}`;
      await waitFor("maintenance to expire the dead worker's job", async () => {
        const [j] = await t.services
          .sql`select state from pgboss.job where name = 'avatar-loop' and data->>'avatarId' = ${id}`;
        return j?.state === 'retry' ? true : undefined;
      });

      // Worker B, in this process: the expired job comes back and completes.
      workers = await startJobWorkers(t.services);
      const done = await waitFor('the avatar to settle', async () => {
        const [a] = await t.services
          .sql`select status, idle_video_status, cache_version, error from avatars where id = ${id}`;
        return a!.status === 'preprocessing' ? undefined : a;
      });
      expect(done).toMatchObject({ status: 'ready', idle_video_status: 'ready', cache_version: 1, error: null });
      // pg-boss records completion just after the handler returns: wait for it rather than read once.
      const job = await waitFor('the job to complete', async () => {
        const [j] = await t.services
          .sql`select state, retry_count from pgboss.job where name = 'avatar-loop' and data->>'avatarId' = ${id}`;
        return j?.state === 'active' ? undefined : j;
      });
      expect(job).toMatchObject({ state: 'completed', retry_count: 1 });
    },
  );
});
