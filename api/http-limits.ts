import type { IncomingMessage, ServerOptions } from 'node:http';
import type { Config } from '../core/platform/config.ts';
import { ApiError } from '../core/platform/errors.ts';

/**
 * How long the server waits for what a client sends, in ms. Past any bound the request is answered
 * 408 request_aborted and its connection closed: a client that stops sending (or sends a byte now
 * and then) must not hold a connection, and the memory behind it, for long.
 */
export interface HttpLimits {
  /** The whole head of a request (Node's `headersTimeout`). */
  headersTimeoutMs: number;
  /** The whole request, head and body (Node's `requestTimeout`): what a slow, large upload needs. */
  requestTimeoutMs: number;
  /** The window over which a body must advance by `bodyMinBytesPerSecond`, or it has stalled. */
  bodyStallMs: number;
  /** 0: any byte in the window is progress. */
  bodyMinBytesPerSecond: number;
}

export function httpLimits(
  config: Pick<
    Config,
    | 'HTTP_HEADERS_TIMEOUT_SECONDS'
    | 'HTTP_REQUEST_TIMEOUT_SECONDS'
    | 'HTTP_BODY_STALL_SECONDS'
    | 'HTTP_BODY_MIN_BYTES_PER_SECOND'
  >,
): HttpLimits {
  return {
    headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_SECONDS * 1000,
    requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_SECONDS * 1000,
    bodyStallMs: config.HTTP_BODY_STALL_SECONDS * 1000,
    bodyMinBytesPerSecond: config.HTTP_BODY_MIN_BYTES_PER_SECOND,
  };
}

/**
 * Node's server options for the two whole-request bounds. Node checks them on an interval (30 s by
 * default, so a 10 s bound could fire at 40 s): here a tenth of the head bound, at most 1 s.
 * `requireHostHeader` off: a request without Host reaches the adapter, which refuses it, and the
 * refusal is answered with the error body like every other (api/http-answer.ts) rather than Node's
 * bare 400.
 */
export function nodeServerOptions(limits: HttpLimits): ServerOptions {
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: Math.round(Math.min(1000, Math.max(20, limits.headersTimeoutMs / 10))),
    requireHostHeader: false,
  };
}

/** Whether a request announces a body (a GET or a POST without one has nothing to wait for). */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** The 408 of a body `watchBody` found stalled. */
export function stalledBody(limits: HttpLimits): ApiError {
  const window = limits.bodyStallMs / 1000;
  return new ApiError(
    'request_aborted',
    limits.bodyMinBytesPerSecond > 0
      ? `The request body stalled: fewer than ${limits.bodyMinBytesPerSecond} bytes per second over ${window} s`
      : `The request body stalled: no byte for ${window} s`,
  );
}

/** Samples per window: a stall is seen at most a quarter of a window late. */
const TICKS = 4;

/**
 * Watches a request body as it arrives; calls `onStall` (once) when it advanced by fewer than
 * `bodyMinBytesPerSecond` (at least one byte) over the last `bodyStallMs`. Progress is the socket's
 * bytes read, so whatever reads the body (JSON parser, multipart stream) is covered alike.
 *
 * A body the app has not taken yet (bytes waiting in the request's buffer, the stream paused: a
 * slow store downstream, a handler still authenticating) is the server's wait, not the client's:
 * the window restarts. Stops by itself once the body is complete; the returned function stops it
 * earlier (the answer is out).
 */
export function watchBody(req: IncomingMessage, limits: HttpLimits, onStall: () => void): () => void {
  const socket = req.socket;
  const need = Math.max(1, Math.ceil((limits.bodyMinBytesPerSecond * limits.bodyStallMs) / 1000));
  // Bytes read at each tick of the current window, oldest first.
  const samples = [socket.bytesRead];
  const timer = setInterval(
    () => {
      if (req.complete || req.destroyed || socket.destroyed) return clearInterval(timer);
      if (req.readableLength > 0 && req.readableFlowing !== true) {
        samples.splice(0, samples.length, socket.bytesRead);
        return;
      }
      samples.push(socket.bytesRead);
      if (samples.length <= TICKS) return;
      if (samples.at(-1)! - samples.shift()! >= need) return;
      clearInterval(timer);
      onStall();
    },
    Math.max(5, limits.bodyStallMs / TICKS),
  );
  timer.unref();
  return () => clearInterval(timer);
}
