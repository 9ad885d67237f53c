/**
 * `npm run agent`: the LiveKit agent worker. It registers with LIVEKIT_URL under AGENT_NAME, uses
 * the same database and storage as the API (beside `npm start` on one machine it finds the running
 * embedded PostgreSQL through DATA_DIR), declares AGENT_SLOTS call slots for CAPACITY_POOL, and on
 * SIGTERM or SIGINT drains: no new calls, the calls in progress get AGENT_DRAIN_SECONDS to finish,
 * the rest are ended and settled.
 */
import { loadConfigOrExit } from '../core/platform/config.ts';
import { checkLipSyncModelOrExit } from '../core/lipsync/model-check.ts';
import { createLogger } from '../core/platform/log.ts';
import { startMetricsServer } from '../core/platform/metrics.ts';
import { runEntryPoint } from '../core/platform/process.ts';
import { openConnections } from '../core/platform/db/index.ts';
import { createServices } from '../core/wiring/services.ts';
import { registerWorkerMetrics } from './metrics.ts';
import { startAgentWorker } from './worker.ts';

const config = loadConfigOrExit();
const log = createLogger(config.LOG_LEVEL);
if (!config.LIVEKIT_URL) {
  console.error('npm run agent needs a LiveKit server: set LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET');
  process.exit(2);
}

runEntryPoint(log, async () => {
  // The worker loads the model in its lip-sync threads too, but only once its database and services are up.
  await checkLipSyncModelOrExit(config.LIPSYNC_MODEL, log);
  const services = await createServices(config, { log });
  // Before any call: opened as a call starts, the pool's connections take the call's event loop.
  await openConnections(services.sql, config.DATABASE_POOL_SIZE);
  const worker = await startAgentWorker(services, { log });
  registerWorkerMetrics(services.metrics, worker.host, { pool: config.CAPACITY_POOL });
  // Prometheus's scrapes, on a port of their own (AGENT_METRICS_PORT=0: none).
  const metrics =
    config.AGENT_METRICS_PORT > 0
      ? await startMetricsServer({
          registry: services.metrics,
          port: config.AGENT_METRICS_PORT,
          host: config.HOST,
          variable: 'AGENT_METRICS_PORT',
          log,
        })
      : undefined;
  process.send?.('ready');
  // LiveKit gone for good (the worker gave up reconnecting): end the calls, exit non-zero so the
  // orchestrator restarts the worker.
  worker.stopped.catch(async (err: unknown) => {
    log.error({ err }, 'agent worker lost LiveKit');
    await worker.drain(0).catch(() => {});
    await services.close().catch(() => {});
    process.exit(1);
  });
  return async () => {
    await worker.drain(config.AGENT_DRAIN_SECONDS * 1000);
    await metrics?.close();
    await services.close();
  };
});
