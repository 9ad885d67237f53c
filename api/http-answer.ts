import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ApiError } from '../core/platform/errors.ts';
import { newRequestId } from '../core/platform/ids.ts';

/**
 * Answers given outside the app: to what Node's parser or the request adapter refuses before the
 * app runs, and to a request the server gives up on while its body arrives. Each carries the error
 * body (docs/api.md, "Errors") and the headers of every answer (X-Request-ID, Cache-Control), and
 * closes the connection: what is left of the request on the wire cannot be told from a next one.
 */

function headersOf(error: ApiError, requestId: string, body: string): Record<string, string> {
  return {
    'Content-Type': 'application/json',
    'Cache-Control': 'no-store',
    'X-Request-ID': requestId,
    ...error.headers,
    'Content-Length': String(Buffer.byteLength(body)),
    Connection: 'close',
  };
}

/** The answer as bytes, for a socket no response object owns. */
function rawAnswer(error: ApiError, requestId: string): string {
  const body = JSON.stringify(error.toBody(requestId));
  const head = [
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}`,
    ...Object.entries(headersOf(error, requestId, body)).map(([k, v]) => `${k}: ${v}`),
  ];
  return `${head.join('\r\n')}\r\n\r\n${body}`;
}

/** How long a client has to take an answer before its connection is closed under it. */
const FLUSH_GRACE_MS = 5000;

/**
 * Writes the answer and ends the socket; `then` (once) when the answer is flushed, or after
 * FLUSH_GRACE_MS: a client that reads nothing, or never closes its side, holds nothing.
 */
function endWith(socket: Duplex, answer: string, then: () => void): void {
  let done = false;
  const once = () => {
    if (done) return;
    done = true;
    clearTimeout(grace);
    then();
  };
  const grace = setTimeout(once, FLUSH_GRACE_MS);
  grace.unref();
  socket.end(answer, once);
}

/** Answers on a socket with no request in flight (a refused head), then closes it. */
export function answerOnSocket(socket: Duplex, error: ApiError): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  endWith(socket, rawAnswer(error, newRequestId()), () => socket.destroy());
}

/** The adapter's answer to a request it could not build (an unparseable URL or Host). */
export function errorAsResponse(error: ApiError): Response {
  const requestId = newRequestId();
  const body = JSON.stringify(error.toBody(requestId));
  return new Response(body, { status: error.status, headers: headersOf(error, requestId, body) });
}

/** Requests the server cut off (and answered) while their body arrived. */
const cutOffRequests = new WeakSet<IncomingMessage>();

/**
 * Gives up on the request in flight behind `res`: answers `error` (under the request id the app
 * gave it, if any) and closes the connection, then ends the request's body, so that whatever in
 * the app reads it fails at once instead of waiting forever (`bodyCutOff` tells the app why).
 *
 * The answer goes to the socket, not through `res`: the app still owns `res`, and its own answer,
 * when its read fails, then goes nowhere instead of throwing on headers already sent.
 */
export function cutOff(res: ServerResponse, error: ApiError): void {
  const req = res.req;
  const socket = req.socket;
  cutOffRequests.add(req);
  const end = () => {
    if (req.complete) socket.destroy();
    else req.destroy();
  };
  if (res.headersSent || !socket.writable) return end();
  const requestId = res.getHeader('x-request-id');
  // Ended only once the answer is flushed: destroying the socket first could drop it.
  endWith(socket, rawAnswer(error, typeof requestId === 'string' ? requestId : newRequestId()), end);
}

/**
 * Why a request's body stopped short, if it did: `client`, the client hung up; `server`, the server
 * cut it off and has answered already. Undefined while the body is whole or still arriving.
 */
export function bodyCutOff(req: IncomingMessage | undefined): 'client' | 'server' | undefined {
  if (!req || req.complete || !req.destroyed) return undefined;
  return cutOffRequests.has(req) ? 'server' : 'client';
}
