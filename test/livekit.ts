/**
 * Live-call test support: a test app's LiveKit configuration on the test run's real LiveKit server,
 * its webhooks (through the run's relay, test/webhook-relay.ts), and an agent registered under the
 * app's AGENT_NAME that records the dispatches LiveKit sends it.
 */
import { fileURLToPath } from 'node:url';
import { AgentServer, ServerOptions, initializeLogger, type JobRequest } from '@livekit/agents';
import { inject } from 'vitest';
import { startApiServer } from '../api/server.ts';
import { randomBase62 } from '../core/platform/ids.ts';
import { LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET } from './deps.ts';

/**
 * Env of a test app on the run's LiveKit server. AGENT_NAME and REDIS_KEY_PREFIX are unique to the
 * call: test files share the LiveKit server and Redis, and must not take each other's dispatches or slots.
 */
export function liveKitEnv(): Record<string, string> {
  const tag = randomBase62(10);
  return {
    LIVEKIT_URL: inject('livekitUrl'),
    LIVEKIT_API_KEY: LIVEKIT_DEV_KEY,
    LIVEKIT_API_SECRET: LIVEKIT_DEV_SECRET,
    AGENT_NAME: `test-${tag}`,
    REDIS_KEY_PREFIX: `test-${tag}:`,
  };
}

/** Has the test run's relay send LiveKit's webhooks to `url` too (until `stop`). */
export async function relayWebhooksTo(url: string): Promise<{ stop(): Promise<void> }> {
  const relay = inject('livekitWebhookRelay');
  const res = await fetch(`${relay}/targets`, { method: 'POST', body: JSON.stringify({ url }) });
  if (!res.ok) throw new Error(`webhook relay answered ${res.status}`);
  const { id } = (await res.json()) as { id: string };
  return { stop: async () => void (await fetch(`${relay}/targets/${id}`, { method: 'DELETE' })) };
}

/**
 * Serves `fetch` (an app) on a real port and has the relay send it LiveKit's webhooks. `relayed:
 * false`: a LiveKit server of the test's own posts them to `${url}/webhooks/livekit` itself.
 */
export async function receiveLiveKitWebhooks(
  fetchHandler: Parameters<typeof startApiServer>[0],
  opts: { relayed?: boolean } = {},
): Promise<{ url: string; stop(): Promise<void> }> {
  const server = await startApiServer(fetchHandler, { port: 0, hostname: '127.0.0.1' });
  const base = `http://127.0.0.1:${server.port}`;
  const relayed = opts.relayed === false ? null : await relayWebhooksTo(`${base}/webhooks/livekit`);
  return {
    url: base,
    stop: async () => {
      await relayed?.stop();
      await server.close({ timeoutMs: 1000 });
    },
  };
}

export interface CapturedDispatch {
  room: string;
  agentName: string;
  metadata: string;
}

/**
 * An agents-js AgentServer registered with the run's LiveKit server under `agentName`: it records
 * each job request LiveKit dispatches to it (room, agent name, metadata) and declines the job.
 */
export async function captureDispatches(
  agentName: string,
): Promise<{ requests: CapturedDispatch[]; stop(): Promise<void> }> {
  initializeLogger({ pretty: false, level: 'fatal' });
  const requests: CapturedDispatch[] = [];
  const server = new AgentServer(
    new ServerOptions({
      agent: fileURLToPath(new URL('./fixtures/noop-agent.ts', import.meta.url)),
      agentName,
      wsURL: inject('livekitUrl'),
      apiKey: LIVEKIT_DEV_KEY,
      apiSecret: LIVEKIT_DEV_SECRET,
      numIdleProcesses: 0,
      port: 0,
      host: '127.0.0.1',
      logLevel: 'fatal',
      // LiveKit offers a job only to workers reporting a load under 1; the default (this machine's
      // CPU use) reaches 1 on a busy test machine, and the dispatch would never come.
      loadFunc: async () => 0,
      requestFunc: async (req: JobRequest) => {
        requests.push({ room: req.room?.name ?? '', agentName: req.job.agentName, metadata: req.job.metadata });
        await req.reject();
      },
    }),
  );
  const registered = new Promise<void>((resolve) => server.event.once('worker_registered' as never, () => resolve()));
  const running = server.run();
  await Promise.race([
    registered,
    running.then(() => Promise.reject(new Error('the capturing agent stopped before it registered'))),
  ]);
  return {
    requests,
    stop: async () => {
      await server.close();
      await running.catch(() => {});
    },
  };
}
