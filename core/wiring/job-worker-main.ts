/**
 * A standalone job worker process (`npx tsx core/wiring/job-worker-main.ts`): the same workers the API
 * server runs in-process, for deployments that scale rendering apart from the API. Same
 * configuration as the API (DATABASE_URL, storage, JOB_*).
 */
import { loadConfigOrExit } from '../platform/config.ts';
import { runEntryPoint } from '../platform/process.ts';
import { createLogger } from '../platform/log.ts';
import { createServices } from './services.ts';
import { startJobWorkers } from './job-workers.ts';

const config = loadConfigOrExit();
const log = createLogger(config.LOG_LEVEL);

runEntryPoint(log, async () => {
  const services = await createServices(config, { log });
  const workers = await startJobWorkers(services);
  log.info({ concurrency: Math.max(1, config.JOB_WORKERS) }, 'job worker started');
  process.send?.('ready');
  // Running renders get their time to finish (then fail and retry elsewhere); then pools and database.
  return async () => {
    await workers.stop({ timeoutMs: 30_000 });
    await services.close();
  };
});
