import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { getRequestListener, RequestError } from '@hono/node-server';
import { loadConfig } from '../core/platform/config.ts';
import { ApiError } from '../core/platform/errors.ts';
import type { Logger } from '../core/platform/log.ts';
import { answerOnSocket, cutOff, errorAsResponse } from './http-answer.ts';
import { hasBody, httpLimits, nodeServerOptions, stalledBody, watchBody, type HttpLimits } from './http-limits.ts';

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

type Fetch = Parameters<typeof getRequestListener>[0];

export interface ApiServerOptions {
  port: number;
  hostname?: string;
  /** How long to wait for what clients send; default: the configuration's defaults. */
  limits?: HttpLimits;
  /** Where requests the server gives up on are logged (info: the client's doing, not a failure). */
  log?: Logger;
}

/** The error of a refusal by Node's HTTP parser (or its timeout checker), before the app runs. */
function parserError(err: NodeJS.ErrnoException, limits: HttpLimits, inFlight: boolean): ApiError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError('headers_too_large', 'Request headers too large');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return inFlight
        ? new ApiError(
            'request_aborted',
            `The request did not arrive in full within ${limits.requestTimeoutMs / 1000} s`,
          )
        : new ApiError(
            'request_aborted',
            `The request headers did not arrive within ${limits.headersTimeoutMs / 1000} s`,
          );
    default:
      return new ApiError('bad_request', 'Malformed HTTP request');
  }
}

/** The adapter's refusals (an unparseable URL or Host) and any failure of the app outside its own error handler. */
function adapterError(err: unknown, log: Logger | undefined): ApiError {
  if (err instanceof RequestError)
    return new ApiError(
      'bad_request',
      /host/i.test(err.message) ? 'Malformed or missing Host header' : 'Malformed request URL',
    );
  log?.error({ err }, 'request failed outside the app');
  return new ApiError(
    'internal_error',
    'Internal error: the request could not be completed. Retry, and quote the requestId if it persists',
  );
}

/** Serves `fetch` (the Hono app) over Node's HTTP server on `port` and `hostname`. */
export async function startApiServer(fetch: Fetch, opts: ApiServerOptions): Promise<ApiServer> {
  const limits = opts.limits ?? httpLimits(loadConfig({}));
  const { log } = opts;
  const server = createServer(
    nodeServerOptions(limits),
    getRequestListener(fetch, { errorHandler: (err) => errorAsResponse(adapterError(err, log)) }),
  );
  let closing: Promise<void> | undefined;
  const inFlight = new Set<ServerResponse>();
  // The response of the request each connection is receiving: what a refusal mid-request answers.
  const receiving = new WeakMap<Socket, ServerResponse>();

  // Prepended so it runs before the app can write the response head. Once closing, every answer not
  // yet started says `Connection: close` (a keep-alive client opens its next connection elsewhere),
  // and a connection that an answer leaves idle is closed. A body that stalls is cut off.
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    inFlight.add(res);
    receiving.set(req.socket, res);
    if (closing) res.shouldKeepAlive = false;
    const stopWatch = hasBody(req)
      ? watchBody(req, limits, () => {
          log?.info(
            { requestId: res.getHeader('x-request-id'), method: req.method, path: req.url?.split('?')[0] },
            'request body stalled',
          );
          cutOff(res, stalledBody(limits));
        })
      : undefined;
    // 'close' follows every answer (finished or cut off); its connection may now be idle.
    res.once('close', () => {
      stopWatch?.();
      inFlight.delete(res);
      if (receiving.get(req.socket) === res) receiving.delete(req.socket);
      if (closing) setImmediate(() => server.closeIdleConnections());
    });
  });

  // Requests Node's HTTP parser refuses (bad request line, control bytes, oversized headers, a head
  // or a whole request past its time) never reach the app: answer them with the error body too.
  // Mid-body (a bad chunk, the request's time up), the request in flight is cut off instead.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    const res = receiving.get(socket as Socket);
    // A socket error (ECONNRESET), or the connection's end in the middle of a body: the client hung
    // up, and no one is left to answer. The app sees its request's body cut short (and logs it).
    const refused = err.code?.startsWith('HPE_') || err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    const hungUp = !refused || (res !== undefined && err.code === 'HPE_INVALID_EOF_STATE');
    if (hungUp || !socket.writable) return socket.destroy();
    const error = parserError(err, limits, res !== undefined);
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT')
      log?.info({ requestId: res?.getHeader('x-request-id'), phase: res ? 'body' : 'headers' }, 'request timed out');
    if (res) cutOff(res, error);
    else answerOnSocket(socket, error);
  });

  // CONNECT is for proxies; Node would drop the connection without a word.
  server.on('connect', (_req: IncomingMessage, socket: Duplex) =>
    answerOnSocket(socket, new ApiError('bad_request', 'CONNECT is not supported: this is an API, not a proxy')),
  );

  // An Expect other than 100-continue: Node would answer a bare 417. RFC 9110 lets a server ignore
  // it; the app then answers the request as it is.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => server.emit('request', req, res));

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
