import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { createAdaptorServer } from '@hono/node-server';
import { newRequestId } from '../core/ids.ts';

export interface ApiServer {
  server: Server;
  /** The port it listens on (the real one when asked for port 0). */
  port: number;
  /**
   * Graceful stop: stops accepting connections, closes idle keep-alive connections at once, lets
   * requests in flight finish (each answered with `Connection: close`, its connection closed after
   * it), and after `timeoutMs` closes whatever is left. Resolves once every connection is closed.
   */
  close(opts?: { timeoutMs?: number }): Promise<void>;
}

/** Serves `fetch` (the Hono app) over Node's HTTP server on `port` and `hostname`. */
export async function startApiServer(fetch: Parameters<typeof createAdaptorServer>[0]['fetch'], opts: { port: number; hostname?: string }): Promise<ApiServer> {
  const server = createAdaptorServer({ fetch }) as Server;
  let closing: Promise<void> | undefined;
  const inFlight = new Set<ServerResponse>();

  // Once closing, every answer not yet started says `Connection: close` (a keep-alive client opens
  // its next connection elsewhere), and a connection that an answer leaves idle is closed. Prepended
  // so it runs before the app can write the response head.
  server.prependListener('request', (_req, res: ServerResponse) => {
    inFlight.add(res);
    if (closing) res.shouldKeepAlive = false;
    res.once('finish', () => {
      inFlight.delete(res);
      if (closing) setImmediate(() => server.closeIdleConnections());
    });
    res.once('close', () => inFlight.delete(res));
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

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.hostname, () => {
      server.off('error', reject);
      resolve();
    });
  });

  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: ({ timeoutMs = 10_000 } = {}) => {
      closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), timeoutMs);
        force.unref();
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        for (const res of inFlight) if (!res.headersSent) res.shouldKeepAlive = false;
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}
