import { STATUS_CODES, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { createAdaptorServer } from '@hono/node-server';
import { ApiError } from '../core/errors.ts';
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
    // 'close' follows every answer (finished or cut off); its connection may now be idle.
    res.once('close', () => {
      inFlight.delete(res);
      if (closing) setImmediate(() => server.closeIdleConnections());
    });
  });

  // Requests Node's HTTP parser refuses (bad request line, control bytes, oversized headers) never
  // reach the app: answer them with the error body too, and close the connection.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable) return socket.destroy();
    const error = err.code === 'HPE_HEADER_OVERFLOW' ? new ApiError('headers_too_large', 'Request headers too large') : new ApiError('bad_request', 'Malformed HTTP request');
    const requestId = newRequestId();
    const body = JSON.stringify(error.toBody(requestId));
    const headers = { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', 'X-Request-ID': requestId, ...error.headers, 'Content-Length': Buffer.byteLength(body), Connection: 'close' };
    const head = [`HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
    socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
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
