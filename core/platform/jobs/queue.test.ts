import { afterAll, describe, expect, it } from 'vitest';
import { testServices, waitFor } from '../../../test/helpers.ts';

const s = await testServices({ env: { JOB_POLL_SECONDS: '1', JOB_RETRY_DELAY_SECONDS: '1', JOB_RETRY_LIMIT: '2' } });
afterAll(() => s.close());

describe('JobQueue (pg-boss)', () => {
  it('enqueue within a transaction commits and rolls back with it', async () => {
    const committed = await s.sql.begin((tx) => s.jobs.enqueue('test-tx', { n: 1 }, {}, tx));
    expect(committed).toMatch(/^[0-9a-f-]{36}$/);
    await expect(
      s.sql.begin(async (tx) => {
        await s.jobs.enqueue('test-tx', { n: 2 }, {}, tx);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    const rows = await s.sql`select data from pgboss.job where name = 'test-tx' order by created_on`;
    expect(rows.map((r) => r.data)).toEqual([{ n: 1 }]);
  });

  it('a throwing handler is retried with backoff, then succeeds', async () => {
    const attempts: number[] = [];
    await s.jobs.work<{ k: string }>('test-retry', async (_data, job) => {
      attempts.push(job.retryCount);
      if (job.retryCount < 1) throw new Error('transient');
    });
    await s.jobs.enqueue('test-retry', { k: 'x' });
    await waitFor('the retried job to complete', async () =>
      (await s.sql`select state from pgboss.job where name = 'test-retry'`)[0]?.state === 'completed'
        ? true
        : undefined,
    );
    expect(attempts).toEqual([0, 1]);
  });
});
