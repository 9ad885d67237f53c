import type { OperationId, PathParams, QueryParams, RequestBody, ResponseBody } from './api-types.ts';
import { ApiError, type QueuePosition } from './errors.ts';
import { OPERATIONS } from './operations.ts';
import { readAvatarMux, type ReadAvatarMuxOptions } from './reader.ts';
import type { AvatarMuxRecord } from './types.ts';

export interface RetryOptions {
  /** Retries after the first attempt (default 2; 0 turns retries off). */
  maxRetries?: number;
  /** First backoff, doubled each retry, with jitter (default 300 ms). */
  baseDelayMs?: number;
  /** Longest wait between attempts; a Retry-After beyond it is not waited for (default 30 s). */
  maxDelayMs?: number;
}

export interface AvatarClientOptions {
  /** A service API key, `svc_<keyId>_<secret>`. Required unless `sessionHeaders` is given. */
  apiKey?: string;
  /**
   * Instead of an API key: the headers of a page of the service's own dashboard, signed in with its
   * session cookie (which the browser sends itself, same origin only). The API takes the cookie only
   * with its anti-forgery header, `X-Dashboard-Csrf`.
   */
  sessionHeaders?: Record<string, string>;
  /** The service origin, e.g. `https://avatars.example.com` (the client adds `/api/v1/...`). */
  baseUrl: string;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  retry?: RetryOptions;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Sent as the Idempotency-Key header; also makes a POST safe to retry. */
  idempotencyKey?: string;
  /** Extra request headers. */
  headers?: Record<string, string>;
}

export interface RequestOptions<K extends OperationId> extends CallOptions {
  path?: PathParams<K>;
  query?: QueryParams<K>;
  body?: RequestBody<K> | FormData;
}

/** A file to upload: bytes or a Blob (a browser File is a Blob). */
export interface UploadInput {
  file: Blob | Uint8Array | ArrayBuffer;
  /** The file name sent with it (the server sniffs the type from the bytes). */
  filename?: string;
  /** When given, must agree with what the bytes are. */
  kind?: 'image' | 'video' | 'audio';
}

/** A turn's decoded stream: iterate it for the mux records (header, audio, video, events, end). */
export interface TurnStream extends AsyncIterable<AvatarMuxRecord> {
  /** The answer's request id. */
  readonly requestId: string | undefined;
  readonly response: Response;
  /** Stops the stream: the download is aborted and iteration ends without an error. */
  cancel(): void;
}

export type MintGrant = ResponseBody<'mintLiveSession'>;
export type MintResult =
  | { queued: false; session: MintGrant; requestId: string | undefined }
  | ({ queued: true; requestId: string | undefined } & QueuePosition);

export interface MintWithQueueOptions extends CallOptions {
  /** Called on each queued answer, to show the position. */
  onQueued?: (position: QueuePosition) => void;
  /** Give up (ApiError capacity_queue) after waiting this long in total; default: wait until granted or aborted. */
  maxWaitMs?: number;
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The client of the avatar platform's REST API (`/api/v1`): typed methods for every operation,
 * generated types (`npm run client:types`), one error type (ApiError) and retries where they are
 * safe. Works wherever `fetch` does (browsers, Node 18+, Deno, Bun).
 *
 * Retries (with exponential backoff and jitter, honouring Retry-After): the per-key rate-limit 429
 * on any call (it refused the request before any work); 408 and 5xx, and failed connections, only
 * on idempotent methods (GET, PUT, DELETE) or calls sent with an Idempotency-Key. Never the
 * concurrency 429 or the capacity queue (see `live.mintWithQueue`), never a turn stream once its
 * bytes began to arrive.
 */
export class AvatarClient {
  private readonly authHeaders: Record<string, string>;
  private readonly baseUrl: string;
  private readonly fetchImpl: typeof fetch;
  private readonly retry: Required<RetryOptions>;

  constructor(options: AvatarClientOptions) {
    if (!options.apiKey && !options.sessionHeaders) throw new TypeError('AvatarClient: apiKey is required');
    if (!options.baseUrl) throw new TypeError('AvatarClient: baseUrl is required');
    this.authHeaders = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : { ...options.sessionHeaders };
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== 'function') throw new TypeError('AvatarClient: no fetch available: pass options.fetch');
    // Called unbound: a browser's fetch throws "Illegal invocation" when called on another object.
    this.fetchImpl = (input, init) => f(input, init);
    this.retry = { maxRetries: 2, baseDelayMs: 300, maxDelayMs: 30_000, ...options.retry };
  }

  // ---------------------------------------------------------------------------------------------
  // Any operation
  // ---------------------------------------------------------------------------------------------

  /** Calls any operation by its id, typed from the generated document. */
  async request<K extends OperationId>(operationId: K, options: RequestOptions<K> = {}): Promise<ResponseBody<K>> {
    const res = await this.send(operationId, options);
    if (res.status === 204) return undefined as ResponseBody<K>;
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as ResponseBody<K>;
  }

  /** The raw answer of a successful call (non-2xx answers throw ApiError, after the retries that are safe). */
  async send<K extends OperationId>(operationId: K, options: RequestOptions<K> = {}): Promise<Response> {
    const op = OPERATIONS[operationId] as (typeof OPERATIONS)[OperationId] | undefined;
    if (!op) throw new TypeError(`Unknown operation ${String(operationId)}`);
    const url = this.url(
      op.path,
      options.path as Record<string, unknown> | undefined,
      options.query as Record<string, unknown> | undefined,
    );
    const headers: Record<string, string> = {
      ...this.authHeaders,
      accept: 'application/json',
      ...options.headers,
    };
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    let body: RequestInit['body'];
    if (options.body instanceof FormData) body = options.body;
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    }
    const safe = IDEMPOTENT.has(op.method) || headers['idempotency-key'] !== undefined;
    for (let attempt = 0; ; attempt++) {
      let error: ApiError;
      try {
        const res = await this.fetchImpl(url, { method: op.method, headers, body, signal: options.signal });
        if (res.ok) return res;
        error = await ApiError.fromResponse(res);
      } catch (err) {
        if (options.signal?.aborted) throw options.signal.reason;
        if (err instanceof ApiError) throw err;
        error = ApiError.network(err);
      }
      const delay = this.retryDelay(error, safe, attempt);
      if (delay === undefined) throw error;
      await sleep(delay, options.signal);
    }
  }

  /** How long to wait before retrying `error`, or undefined when it must not be retried. */
  private retryDelay(error: ApiError, safe: boolean, attempt: number): number | undefined {
    if (attempt >= this.retry.maxRetries) return undefined;
    const retriable =
      error.kind === 'rate_limited' ||
      (safe &&
        (error.kind === 'network' ||
          ((error.status === 408 || (error.status >= 500 && error.status !== 501)) &&
            error.kind === 'http' &&
            error.retryable !== false)));
    if (!retriable) return undefined;
    if (error.retryAfterMs !== undefined)
      return error.retryAfterMs <= this.retry.maxDelayMs ? error.retryAfterMs : undefined;
    const backoff = this.retry.baseDelayMs * 2 ** attempt;
    return Math.min(this.retry.maxDelayMs, backoff / 2 + Math.random() * (backoff / 2));
  }

  private url(template: string, path: Record<string, unknown> = {}, query: Record<string, unknown> = {}): string {
    const filled = template.replace(/\{([^}]+)\}/g, (_m, name: string) => {
      const v = path[name];
      if (v === undefined || v === null || v === '')
        throw new TypeError(`Missing path parameter ${name} for ${template}`);
      return encodeURIComponent(String(v));
    });
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) params.append(k, String(v));
    const qs = params.toString();
    return `${this.baseUrl}${filled}${qs ? `?${qs}` : ''}`;
  }

  // ---------------------------------------------------------------------------------------------
  // Avatars, clips and loops
  // ---------------------------------------------------------------------------------------------

  readonly avatars = {
    list: (o?: CallOptions) => this.request('listAvatars', { ...o }),
    create: (body: RequestBody<'createAvatar'>, o?: CallOptions) => this.request('createAvatar', { ...o, body }),
    get: (avatarId: string, o?: CallOptions) => this.request('getAvatar', { ...o, path: { avatarId } }),
    update: (avatarId: string, body: RequestBody<'updateAvatar'>, o?: CallOptions) =>
      this.request('updateAvatar', { ...o, path: { avatarId }, body }),
    delete: (avatarId: string, o?: CallOptions) => this.request('deleteAvatar', { ...o, path: { avatarId } }),
    /** The clip library envelope. */
    clips: (avatarId: string, o?: CallOptions) => this.request('getClipLibrary', { ...o, path: { avatarId } }),
    /** Replaces the clip declaration (pass an idempotencyKey to make it safe to retry). */
    putClips: (avatarId: string, body: RequestBody<'putClipLibrary'>, o?: CallOptions) =>
      this.request('putClipLibrary', { ...o, path: { avatarId }, body }),
    reviewClip: (avatarId: string, body: RequestBody<'reviewClip'>, o?: CallOptions) =>
      this.request('reviewClip', { ...o, path: { avatarId }, body }),
    /** Re-directs the idle loop from a new motion prompt (202; the render takes minutes). */
    redirectLoop: (avatarId: string, body: RequestBody<'redirectAvatarLoop'>, o?: CallOptions) =>
      this.request('redirectAvatarLoop', { ...o, path: { avatarId }, body }),
  };

  // ---------------------------------------------------------------------------------------------
  // Assets
  // ---------------------------------------------------------------------------------------------

  readonly assets = {
    /** Newest first, paged with `nextCursor` (pass it back as `cursor`); `status` and `kind` narrow the list. */
    list: (query?: QueryParams<'listAssets'>, o?: CallOptions) =>
      this.request('listAssets', { ...o, ...(query ? { query } : {}) }),
    /** One asset, with a fresh signed `publicUrl` when ready. */
    get: (assetId: string, o?: CallOptions) => this.request('getAsset', { ...o, path: { assetId } }),
    /** Deletes the asset and its bytes; 409 `asset_in_use` (with `usedBy`) while an avatar or clip uses it. */
    delete: (assetId: string, o?: CallOptions) => this.request('deleteAsset', { ...o, path: { assetId } }),
    /** Uploads a file (multipart); its type is sniffed from the bytes. */
    upload: (input: UploadInput, o?: CallOptions) => {
      const form = new FormData();
      if (input.kind) form.append('kind', input.kind);
      const blob = input.file instanceof Blob ? input.file : new Blob([input.file as Uint8Array<ArrayBuffer>]);
      form.append('file', blob, input.filename ?? 'upload');
      return this.request('uploadAsset', { ...o, body: form });
    },
    /** Registers a file at a public URL (streamed into storage by the service). */
    createRemote: (body: RequestBody<'createRemoteAsset'>, o?: CallOptions) =>
      this.request('createRemoteAsset', { ...o, body }),
  };

  // ---------------------------------------------------------------------------------------------
  // Realtime: prepare, turns, video-cache plans, lipsync
  // ---------------------------------------------------------------------------------------------

  readonly realtime = {
    prepare: (body: RequestBody<'prepareRealtime'>, o?: CallOptions) => this.request('prepareRealtime', { ...o, body }),
    planVideoCache: (body: RequestBody<'planVideoCache'>, o?: CallOptions) =>
      this.request('planVideoCache', { ...o, body }),
    /**
     * Runs a turn and decodes its stream as it arrives. Errors before the stream starts throw
     * ApiError (retried only when an idempotencyKey is given); a failure inside the stream arrives
     * as an `error` record. `cancel()` (or the signal) stops it.
     */
    turn: async (
      body: RequestBody<'runTurn'>,
      o: CallOptions & { mux?: ReadAvatarMuxOptions } = {},
    ): Promise<TurnStream> => {
      const controller = new AbortController();
      const signal = o.signal ? anySignal([o.signal, controller.signal]) : controller.signal;
      const response = await this.send('runTurn', { ...o, signal, body });
      if (!response.body)
        throw new ApiError({ message: 'The turn answered without a body', status: response.status, kind: 'http' });
      const stream = response.body;
      let cancelled = false;
      return {
        requestId: response.headers.get('x-request-id') ?? undefined,
        response,
        cancel() {
          cancelled = true;
          controller.abort();
        },
        async *[Symbol.asyncIterator]() {
          try {
            yield* readAvatarMux(stream, o.mux);
          } catch (err) {
            if (cancelled || signal.aborted) return;
            throw err;
          }
        },
      };
    },
  };

  /** Renders audio to a lip-synced talking-head MP4 (answered when rendered; billed as realtime seconds). */
  lipsync(body: RequestBody<'renderLipsync'>, o?: CallOptions) {
    return this.request('renderLipsync', { ...o, body });
  }

  // ---------------------------------------------------------------------------------------------
  // Live sessions
  // ---------------------------------------------------------------------------------------------

  readonly live = {
    /**
     * Mints a live session. Capacity full is a result, not an error: `{ queued: true, ticket,
     * queueSize, retryAfterMs }`; mint again after `retryAfterMs` with `queue_ticket_id: ticket`
     * (or use `mintWithQueue`). The plan's concurrency limit throws ApiError `concurrency_limit`.
     */
    mint: async (body: RequestBody<'mintLiveSession'>, o?: CallOptions): Promise<MintResult> => {
      try {
        const res = await this.send('mintLiveSession', { ...o, body });
        return {
          queued: false,
          session: (await res.json()) as MintGrant,
          requestId: res.headers.get('x-request-id') ?? undefined,
        };
      } catch (err) {
        if (err instanceof ApiError && err.kind === 'capacity_queue' && err.queue)
          return { queued: true, requestId: err.requestId, ...err.queue };
        throw err;
      }
    },
    /**
     * Mints, waiting in the capacity queue as long as it takes: each queued answer is reported to
     * `onQueued`, then the mint is repeated with the ticket after the server's hint. Aborting while
     * queued gives the ticket back (release) and rejects with the signal's reason.
     */
    mintWithQueue: async (body: RequestBody<'mintLiveSession'>, o: MintWithQueueOptions = {}): Promise<MintGrant> => {
      const started = Date.now();
      let ticket: string | undefined;
      for (;;) {
        const r = await this.live.mint(
          (ticket ? { ...body, queue_ticket_id: ticket } : body) as RequestBody<'mintLiveSession'>,
          o,
        );
        if (!r.queued) return r.session;
        ticket = r.ticket || ticket;
        o.onQueued?.({ ticket: r.ticket, queueSize: r.queueSize, retryAfterMs: r.retryAfterMs });
        if (o.maxWaitMs !== undefined && Date.now() - started + r.retryAfterMs > o.maxWaitMs) {
          await this.releaseTicket(ticket);
          throw new ApiError({
            message: `Still queued after ${o.maxWaitMs} ms`,
            status: 429,
            kind: 'capacity_queue',
            retryable: true,
            queue: r,
            requestId: r.requestId,
          });
        }
        try {
          await sleep(r.retryAfterMs, o.signal);
        } catch (err) {
          await this.releaseTicket(ticket);
          throw err;
        }
      }
    },
    release: (body: RequestBody<'releaseLiveSession'>, o?: CallOptions) =>
      this.request('releaseLiveSession', { ...o, body }),
    capacity: (o?: CallOptions) => this.request('getLiveCapacity', { ...o }),
  };

  private async releaseTicket(ticket: string | undefined): Promise<void> {
    if (!ticket) return;
    await this.live.release({ queue_ticket_id: ticket } as RequestBody<'releaseLiveSession'>).catch(() => {});
  }

  // ---------------------------------------------------------------------------------------------
  // Scenes, recordings, connection history
  // ---------------------------------------------------------------------------------------------

  readonly scenes = {
    create: (body: RequestBody<'createScene'>, o?: CallOptions) => this.request('createScene', { ...o, body }),
    get: (sceneId: string, o?: CallOptions) =>
      this.request('getScene', { ...o, path: { sceneId } as PathParams<'getScene'> }),
  };

  readonly recordings = {
    list: (query?: QueryParams<'listRecordings'>, o?: CallOptions) =>
      this.request('listRecordings', { ...o, ...(query ? { query } : {}) }),
    get: (recordingId: string, o?: CallOptions) =>
      this.request('getRecording', { ...o, path: { recordingId } as PathParams<'getRecording'> }),
    /** A private playback URL (signed, at most an hour, Range-capable). */
    access: (recordingId: string, o?: CallOptions) =>
      this.request('getRecordingAccess', { ...o, path: { recordingId } as PathParams<'getRecordingAccess'> }),
  };

  readonly sessions = {
    connectionHistory: (sessionId: string, o?: CallOptions) =>
      this.request('getConnectionHistory', { ...o, path: { sessionId } as PathParams<'getConnectionHistory'> }),
  };

  // ---------------------------------------------------------------------------------------------
  // Billing and keys
  // ---------------------------------------------------------------------------------------------

  readonly credits = {
    balance: (o?: CallOptions) => this.request('getCreditBalance', { ...o }),
  };

  readonly usage = {
    /** Per-session billing detail, paged with `nextCursor`. */
    sessions: (query?: QueryParams<'listSessionUsage'>, o?: CallOptions) =>
      this.request('listSessionUsage', { ...o, ...(query ? { query } : {}) }),
  };

  readonly apiKeys = {
    create: (body: RequestBody<'createApiKey'>, o?: CallOptions) => this.request('createApiKey', { ...o, body }),
  };

  readonly workspace = {
    get: (o?: CallOptions) => this.request('getWorkspace', { ...o }),
    /** `{ allowedOrigins }` (scope api_keys:write): replaces the list; `[]` removes the limit. */
    update: (body: RequestBody<'updateWorkspace'>, o?: CallOptions) => this.request('updateWorkspace', { ...o, body }),
  };
}

/** AbortSignal.any where it exists (2023+ runtimes), otherwise the same by hand. */
function anySignal(signals: AbortSignal[]): AbortSignal {
  const any = (AbortSignal as unknown as { any?: (s: AbortSignal[]) => AbortSignal }).any;
  if (any) return any(signals);
  const c = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      c.abort(s.reason);
      break;
    }
    s.addEventListener('abort', () => c.abort(s.reason), { once: true });
  }
  return c.signal;
}
