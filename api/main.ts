import { loadConfigOrExit } from '../core/platform/config.ts';
import { checkLipSyncModelOrExit } from '../core/lipsync/model-check.ts';
import { runEntryPoint } from '../core/platform/process.ts';
import { createLogger } from '../core/platform/log.ts';
import { startMetricsServer } from '../core/platform/metrics.ts';
import { createServices } from '../core/wiring/services.ts';
import { startJobWorkers } from '../core/wiring/job-workers.ts';
import { createApp } from './app.ts';
import { startJanitor } from './janitor.ts';
import { httpLimits } from './http-limits.ts';
import { startApiServer } from './server.ts';
import { dashboardBundle } from './dashboard/bundle.ts';

/** `npm start`: the API on PORT, on the embedded defaults unless configured otherwise. */
const config = loadConfigOrExit();
const log = createLogger(config.LOG_LEVEL);

runEntryPoint(log, async () => {
  await checkLipSyncModelOrExit(config.LIPSYNC_MODEL, log);
  const services = await createServices(config, { log, listen: true });
  const app = createApp(services);
  // The dashboard's browser code, bundled now rather than on its first visit (a failed build is
  // logged and retried on the next visit; the API serves on regardless).
  dashboardBundle().then(
    (b) => log.info({ script: b.script }, 'dashboard bundled'),
    (err: unknown) =>
      // esbuild's own process was stopped: Ctrl-C reaches the whole process group, esbuild first.
      err instanceof Error && err.message === 'The service was stopped'
        ? log.info('dashboard bundle stopped')
        : log.error({ err }, 'dashboard bundle failed'),
  );
  const janitor = startJanitor(services);
  // Background jobs (avatar loop generation; each render runs in a child process). JOB_WORKERS=0 leaves them to core/wiring/job-worker-main.ts.
  const workers = config.JOB_WORKERS > 0 ? await startJobWorkers(services) : undefined;
  const server = await startApiServer(app.fetch, {
    port: config.PORT,
    hostname: config.HOST,
    limits: httpLimits(config),
    log,
  });
  // Prometheus's scrapes, on a port of their own (METRICS_PORT=0: none).
  const metrics =
    config.METRICS_PORT > 0
      ? await startMetricsServer({
          registry: services.metrics,
          port: config.METRICS_PORT,
          host: config.HOST,
          variable: 'METRICS_PORT',
          log,
        })
      : undefined;
  log.info(
    {
      port: server.port,
      metricsPort: metrics?.port ?? null,
      publicBaseUrl: config.publicBaseUrl,
      database: config.DATABASE_URL ? 'external' : 'embedded',
      redis: Boolean(config.REDIS_URL),
    },
    'api listening',
  );

  // In order: no new connections and the requests in flight answered, then no background work,
  // then the key listener, the pools and the database (services.close).
  return async () => {
    await server.close({ timeoutMs: 10_000 });
    await metrics?.close();
    await janitor.stop();
    await workers?.stop({ timeoutMs: 10_000 });
    await services.close();
  };
});
