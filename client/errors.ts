/**
 * The one error type of the client: every failed call throws an ApiError. `kind` tells the outcomes
 * apart that share a status, the three kinds of 429 above all:
 *
 * - `rate_limited`: the per-key request rate limit (a 429 with no `code` and no queue fields).
 *   Retried automatically after Retry-After; thrown with `retryAfterMs` when retries run out.
 * - `concurrency_limit`: the plan's concurrent-session limit (`code: concurrency_limit_reached`,
 *   with the counts in `concurrency`). Not a queue: end a session first. Never retried.
 * - `capacity_queue`: capacity is full and the mint was queued (`queue_ticket_id`, `queue_size`,
 *   `recommended_retry_ms`). `live.mint` returns it as a result, never throws it; other calls
 *   throw it with `queue`.
 * - `http`: any other error answer; `network`: no answer at all (status 0).
 */

export type ApiErrorKind = 'http' | 'rate_limited' | 'concurrency_limit' | 'capacity_queue' | 'network';

/** The counts a concurrency refusal carries. */
export interface ConcurrencyCounts {
  maxConcurrentSessions?: number;
  liveSessions?: number;
  activeSessions?: number;
  connectingSessions?: number;
  pendingSessions?: number;
}

/** Where a queued mint stands. */
export interface QueuePosition {
  /** Send it back on the next mint (`queue_ticket_id`) to keep the place. */
  ticket: string;
  queueSize: number;
  /** Wait this long before minting again. */
  retryAfterMs: number;
}

export class ApiError extends Error {
  override name = 'ApiError';
  /** The HTTP status; 0 when no answer arrived. */
  readonly status: number;
  /** The stable machine code of the body, when it has one (the rate-limit 429 has none). */
  readonly code: string | undefined;
  /** The answer's request id (body `requestId`, else the X-Request-ID header): quote it to support. */
  readonly requestId: string | undefined;
  /** Whether repeating the same request unchanged may help (the body's `retryable`). */
  readonly retryable: boolean;
  readonly kind: ApiErrorKind;
  /** The field a validation error names (null: the whole body). */
  readonly field: string | null | undefined;
  /** From Retry-After (or the queue's hint): how long to wait before trying again. */
  readonly retryAfterMs: number | undefined;
  /** On `concurrency_limit`: the counts that refused the session. */
  readonly concurrency: ConcurrencyCounts | undefined;
  /** On `capacity_queue`: the queue position. */
  readonly queue: QueuePosition | undefined;
  /** The whole error body, as sent. */
  readonly body: Record<string, unknown> | undefined;

  constructor(init: {
    message: string;
    status: number;
    kind: ApiErrorKind;
    code?: string;
    requestId?: string;
    retryable?: boolean;
    field?: string | null;
    retryAfterMs?: number;
    concurrency?: ConcurrencyCounts;
    queue?: QueuePosition;
    body?: Record<string, unknown>;
    cause?: unknown;
  }) {
    super(init.message);
    if (init.cause !== undefined)
      Object.defineProperty(this, 'cause', { value: init.cause, configurable: true, writable: true });
    this.status = init.status;
    this.kind = init.kind;
    this.code = init.code;
    this.requestId = init.requestId;
    this.retryable = init.retryable ?? false;
    this.field = init.field;
    this.retryAfterMs = init.retryAfterMs;
    this.concurrency = init.concurrency;
    this.queue = init.queue;
    this.body = init.body;
  }

  /** The error of a non-2xx answer (reads its body). */
  static async fromResponse(res: Response): Promise<ApiError> {
    const text = await res.text().catch(() => '');
    let body: Record<string, unknown> | undefined;
    try {
      const parsed: unknown = text ? JSON.parse(text) : undefined;
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
    } catch {
      // Not JSON (a proxy's page): the status still says what happened.
    }
    const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
    const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
    const code = str(body?.code);
    const requestId = str(body?.requestId) ?? res.headers.get('x-request-id') ?? undefined;
    const retryAfterMs = parseRetryAfter(res.headers.get('retry-after'));
    const base = {
      status: res.status,
      code,
      requestId,
      retryable: body?.retryable === true,
      field: body && 'field' in body ? ((body.field as string | null) ?? null) : undefined,
      retryAfterMs,
      body,
    };
    const message =
      str(body?.error) ?? (text && !body ? `HTTP ${res.status}: ${text.slice(0, 200)}` : `HTTP ${res.status}`);
    if (res.status === 429) {
      if (code === 'concurrency_limit_reached' || code === 'scene_concurrency_limit_reached') {
        const concurrency: ConcurrencyCounts = {};
        for (const k of [
          'maxConcurrentSessions',
          'liveSessions',
          'activeSessions',
          'connectingSessions',
          'pendingSessions',
        ] as const) {
          const v = num(body?.[k]);
          if (v !== undefined) concurrency[k] = v;
        }
        return new ApiError({ ...base, message, kind: 'concurrency_limit', concurrency });
      }
      if (body && ('queue_ticket_id' in body || 'queue_size' in body || 'recommended_retry_ms' in body)) {
        const queue: QueuePosition = {
          ticket: str(body.queue_ticket_id) ?? '',
          queueSize: num(body.queue_size) ?? 0,
          retryAfterMs: num(body.recommended_retry_ms) ?? retryAfterMs ?? 1000,
        };
        return new ApiError({
          ...base,
          message:
            str(body.error) ??
            `Capacity is full: queued at position ${queue.queueSize}, retry in ${queue.retryAfterMs} ms`,
          kind: 'capacity_queue',
          retryable: true,
          retryAfterMs: queue.retryAfterMs,
          queue,
        });
      }
      if (code === undefined) return new ApiError({ ...base, message, kind: 'rate_limited', retryable: true });
    }
    return new ApiError({ ...base, message, kind: 'http' });
  }

  /** No answer: the connection failed or the fetch threw. */
  static network(cause: unknown): ApiError {
    const why = cause instanceof Error ? cause.message : String(cause);
    return new ApiError({
      message: `The request did not get an answer: ${why}`,
      status: 0,
      kind: 'network',
      retryable: true,
      cause,
    });
  }
}

/** Retry-After (seconds, or an HTTP date) in milliseconds. */
export function parseRetryAfter(value: string | null): number | undefined {
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.round(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}
