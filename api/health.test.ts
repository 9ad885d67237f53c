import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMetricsServer, type MetricsServer } from '../core/platform/metrics.ts';
import { freePort, LIVEKIT_DEV_SECRET, startRedis, type RunningServer } from '../test/deps.ts';
import { json, testApi, type TestApi } from '../test/helpers.ts';
import { liveKitEnv } from '../test/livekit.ts';
import { MINT, readyAvatar, setSlots } from './routes/realtime/test-support.ts';

/**
 * The probes and the metrics an operator runs the API by: /healthz and /readyz on the public port
 * (without auth), Prometheus's /metrics on a listener of its own, on the real database, Redis and
 * LiveKit server.
 */
describe('GET /readyz', () => {
  let redis: RunningServer | undefined;
  afterAll(async () => await redis?.stop());

  it('answers 200 with each dependency ok: the database, Redis and LiveKit, all configured', async () => {
    const t = await testApi({ redis: true, env: liveKitEnv() });
    try {
      const res = await t.app.request('/readyz');
      expect(res.status).toBe(200);
      expect(await json(res)).toEqual({ ok: true, dependencies: { database: 'ok', redis: 'ok', livekit: 'ok' } });
      // Liveness needs nothing but the process.
      expect((await t.app.request('/healthz')).status).toBe(200);
    } finally {
      await t.close();
    }
  });

  it('says what is not configured, and answers 200 without it', async () => {
    const t = await testApi();
    try {
      const res = await t.app.request('/readyz');
      expect(res.status).toBe(200);
      expect(await json(res)).toEqual({
        ok: true,
        dependencies: { database: 'ok', redis: 'not_configured', livekit: 'not_configured' },
      });
    } finally {
      await t.close();
    }
  });

  it('answers 503 not_ready naming Redis once the Redis it is configured with stops', async () => {
    redis = await startRedis();
    const t = await testApi({ env: { REDIS_URL: redis.url } });
    try {
      expect((await t.app.request('/readyz')).status).toBe(200);
      await redis.stop();
      const res = await t.app.request('/readyz');
      expect(res.status).toBe(503);
      const body = await json(res);
      expect(body).toMatchObject({
        status: 503,
        code: 'not_ready',
        retryable: true,
        error: 'Not ready: redis does not answer',
        dependencies: { database: 'ok', redis: 'down', livekit: 'not_configured' },
      });
      expect(body.requestId).toMatch(/^req_/);
    } finally {
      await t.close();
    }
  });

  it('answers 503 naming LiveKit when the LiveKit it is configured with refuses its credentials', async () => {
    const t = await testApi({ env: { ...liveKitEnv(), LIVEKIT_API_SECRET: `${LIVEKIT_DEV_SECRET}-wrong` } });
    try {
      const res = await t.app.request('/readyz');
      expect(res.status).toBe(503);
      expect(await json(res)).toMatchObject({
        code: 'not_ready',
        error: 'Not ready: livekit does not answer',
        dependencies: { database: 'ok', livekit: 'down' },
      });
    } finally {
      await t.close();
    }
  });
});

describe('GET /metrics on METRICS_PORT', () => {
  let t: TestApi;
  let metrics: MetricsServer;
  const scrape = async () => {
    const res = await fetch(`http://127.0.0.1:${metrics.port}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return res.text();
  };

  beforeAll(async () => {
    t = await testApi({ env: liveKitEnv() });
    metrics = await startMetricsServer({
      registry: t.services.metrics,
      port: await freePort(),
      host: '127.0.0.1',
      variable: 'METRICS_PORT',
      log: t.services.log,
    });
  });
  afterAll(async () => {
    await metrics?.close();
    await t?.close();
  });

  it('times requests by method, route template and status', async () => {
    const { apiKey } = await t.newTenant({ credits: 10 });
    for (let i = 0; i < 3; i++)
      expect((await t.request('GET', '/api/v1/avatars/ava_doesNotExist', { key: apiKey })).status).toBe(404);
    expect((await t.request('GET', '/api/v1/credits/balance', { key: apiKey })).status).toBe(200);
    expect((await t.app.request('/nothing/here')).status).toBe(404);
    const text = await scrape();
    expect(text).toContain('# TYPE http_request_duration_seconds histogram');
    expect(text).toMatch(
      /^http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/avatars\/\{avatarId\}",status="404"\} 3$/m,
    );
    expect(text).toMatch(
      /^http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/credits\/balance",status="200"\} 1$/m,
    );
    // A path no route has is one label value, never the path itself.
    expect(text).toMatch(/route="unmatched",status="404"/);
    expect(text).not.toContain('doesNotExist');
    expect(text).not.toContain('/nothing/here');
  });

  it('exports live calls by state, the capacity queue by pool, reserved credits and jobs, read on scrape', async () => {
    const { tenantId, apiKey } = await t.newTenant({ credits: 100 });
    const avatarId = await readyAvatar(t, tenantId);
    await setSlots(t, 'primary', 1);
    const before = await scrape();
    const value = (text: string, series: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    expect(value(before, 'avatar_live_sessions{state="pending"}')).toBe(0);
    expect(value(before, 'avatar_credits_reserved_micros')).toBe(0);

    // One call takes the only slot (pending: no worker joins it); the next mint queues.
    const first = await t.request('POST', MINT, {
      key: apiKey,
      body: { avatar_id: avatarId, max_duration_seconds: 60 },
    });
    expect(first.status, await first.clone().text()).toBe(200);
    const second = await t.request('POST', MINT, { key: apiKey, body: { avatar_id: avatarId } });
    expect(second.status, await second.clone().text()).toBe(429);

    const after = await scrape();
    expect(value(after, 'avatar_live_sessions{state="pending"}')).toBe(1);
    expect(value(after, 'avatar_live_sessions{state="active"}')).toBe(0);
    expect(value(after, 'avatar_capacity_queue_size{pool="primary"}')).toBe(1);
    // The call's reservation: 60 s at a live second's price (1 credit second, 1e6 micros).
    expect(value(after, 'avatar_credits_reserved_micros')).toBe(60_000_000);
    // The job queue has not started in this process: no jobs, and the gauge answers without failing.
    expect(after).toContain('# TYPE avatar_jobs gauge');
    expect(after).toContain('# TYPE process_cpu_seconds_total counter');
  });

  it('shows no secret: neither an API key nor the LiveKit secret appear in what it exports', async () => {
    const { apiKey } = await t.newTenant({ credits: 1 });
    await t.request('GET', '/api/v1/credits/balance', { key: apiKey });
    const text = await scrape();
    expect(text).not.toContain(apiKey);
    expect(text).not.toContain(apiKey.split('_').at(-1)!);
    expect(text).not.toContain(t.services.config.LIVEKIT_API_SECRET!);
  });

  it('is not served on the public port: GET /metrics there is 404 in the error body', async () => {
    const res = await t.app.request('/metrics');
    expect(res.status).toBe(404);
    expect(await json(res)).toMatchObject({ status: 404, code: 'not_found', retryable: false });
    // And the metrics listener serves nothing but /metrics.
    expect((await fetch(`http://127.0.0.1:${metrics.port}/api/v1/credits/balance`)).status).toBe(404);
  });
});
