import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The test run's LiveKit server has one webhook URL: this relay, started by the global setup. It
 * fans every webhook out, as LiveKit sent it (body and signature untouched), to the targets test
 * files register (each test file runs its own app on a port of its own): `POST /targets {url}`
 * answers `{id}`, `DELETE /targets/<id>` unregisters. Each target gets the webhooks in the order
 * LiveKit sent them. Helpers: test/livekit.ts `receiveLiveKitWebhooks`.
 */
export interface WebhookRelay {
  /** Where LiveKit posts. */
  ingestUrl: string;
  /** Where test files register their targets. */
  controlUrl: string;
  stop(): Promise<void>;
}

const MAX_BODY = 1024 * 1024;

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) req.destroy(new Error('body too large'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export async function startWebhookRelay(): Promise<WebhookRelay> {
  const targets = new Map<string, { url: string; chain: Promise<void> }>();
  let seq = 0;
  const server = http.createServer((req, res) => {
    void (async () => {
      try {
        const body = await readBody(req);
        const url = req.url ?? '/';
        if (req.method === 'POST' && url === '/livekit') {
          res.writeHead(200).end();
          const headers: Record<string, string> = {
            'content-type': String(req.headers['content-type'] ?? 'application/webhook+json'),
          };
          if (req.headers.authorization) headers.authorization = req.headers.authorization;
          for (const t of targets.values()) {
            t.chain = t.chain.then(async () => {
              try {
                const r = await fetch(t.url, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
                await r.arrayBuffer();
              } catch {
                // A target that went away (its test file ended) misses the webhook, as a dead API would.
              }
            });
          }
          return;
        }
        if (req.method === 'POST' && url === '/targets') {
          const { url: target } = JSON.parse(body) as { url: string };
          const id = `t${++seq}`;
          targets.set(id, { url: target, chain: Promise.resolve() });
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id }));
          return;
        }
        const del = /^\/targets\/(t\d+)$/.exec(url);
        if (req.method === 'DELETE' && del) {
          targets.delete(del[1]!);
          res.writeHead(204).end();
          return;
        }
        res.writeHead(404).end();
      } catch {
        if (!res.headersSent) res.writeHead(400).end();
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    ingestUrl: `${base}/livekit`,
    controlUrl: base,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
