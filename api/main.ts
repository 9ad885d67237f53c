import type { Duplex } from 'node:stream';
import { serve } from '@hono/node-server';
import { loadConfigOrExit } from '../core/config.ts';
import { onShutdown, runMain } from '../core/process.ts';
import { newRequestId } from '../core/ids.ts';
import { createLogger } from '../core/log.ts';
import { createServices } from '../core/services.ts';
import { startJobWorkers } from '../core/jobs/workers.ts';
import { createApp } from './app.ts';
import { startJanitor } from './janitor.ts';

/** `npm start`: the API on PORT, on the embedded defaults unless configured otherwise. */
async function main() {
  const config = loadConfigOrExit();
  const log = createLogger(config.LOG_LEVEL);
  const services = await createServices(config, { log, listen: true });
  const app = createApp(services);
  const janitor = startJanitor(services);
  // Background jobs (avatar loop generation; each render runs in a child process). JOB_WORKERS=0 leaves them to core/jobs/worker-main.ts.
  const workers = config.JOB_WORKERS > 0 ? await startJobWorkers(services) : undefined;
  const server = serve({ fetch: app.fetch, port: config.PORT, hostname: config.HOST }, (info) => {
    log.info({ port: info.port, publicBaseUrl: config.publicBaseUrl, database: config.DATABASE_URL ? 'external' : 'embedded', redis: Boolean(config.REDIS_URL) }, 'api listening');
  });

  // Requests Node's HTTP parser refuses (bad request line, control bytes, oversized headers) never
  // reach the app: answer them with the spec's error body too.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable) return socket.destroy();
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const status = tooLarge ? 431 : 400;
    const requestId = newRequestId();
    const body = JSON.stringify({ error: tooLarge ? 'Request headers too large' : 'Malformed HTTP request', status, code: 'bad_request', retryable: false, requestId });
    socket.end(
      `HTTP/1.1 ${status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\nContent-Type: application/json\r\n` +
        `Cache-Control: no-store\r\nX-Request-ID: ${requestId}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });

  onShutdown(log, async () => {
    janitor.stop();
    server.close();
    await workers?.stop({ timeoutMs: 10_000 });
    await services.close();
  });
}

runMain(main);
