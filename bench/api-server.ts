import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { createApp } from '../api/app.ts';
import { loadConfig } from '../core/platform/config.ts';
import { createLogger } from '../core/platform/log.ts';
import { createServices } from '../core/wiring/services.ts';

/**
 * The server process of the API benchmark (started by bench/api-auth.ts with an IPC channel;
 * configured by the environment like api/main.ts). Two listeners in this one process:
 * - the real API app of createApp, plus one bench-only route registered on it without the guard
 *   (`GET /bench/app-balance/:tenantId`: request context middleware, no auth, no throttle);
 * - a bare Hono app with the same handler work and nothing else (`GET /bench/balance/:tenantId`).
 * Says {type: 'ready', apiPort, barePort, pid} over IPC once listening; exits on {type: 'stop'}.
 */

type Message = { type: 'stop' };

const config = loadConfig(process.env);
const services = await createServices(config, { log: createLogger(config.LOG_LEVEL), listen: true });

const app = createApp(services);
app.get('/bench/app-balance/:tenantId', async (c) =>
  c.json(await services.ledger.balance(c.req.param('tenantId')), 200),
);

const bare = new Hono();
bare.get('/bench/balance/:tenantId', async (c) => c.json(await services.ledger.balance(c.req.param('tenantId')), 200));

function listen(fetch: (req: Request) => Response | Promise<Response>): Promise<{ port: number; close(): void }> {
  return new Promise((resolve) => {
    const server = serve({ fetch, port: 0, hostname: '127.0.0.1' }, (info) =>
      resolve({ port: info.port, close: () => server.close() }),
    );
  });
}

const [api, bareServer] = await Promise.all([listen(app.fetch), listen(bare.fetch)]);

process.on('message', (m: Message) => {
  if (m.type === 'stop') {
    api.close();
    bareServer.close();
    void services.close().finally(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
process.send?.({ type: 'ready', apiPort: api.port, barePort: bareServer.port, pid: process.pid });
