/**
 * The one error type of the service. Every failure a client can see is an ApiError with a code
 * from this table; the table is exhaustive, so a new code cannot be thrown without a status.
 * The wire shape is the error body documented in docs/api.md ("Errors") and /openapi.json (`Error`).
 */
const ERROR_STATUS = {
  bad_request: 400,
  malformed_json: 400,
  portrait_url_not_supported: 400,
  unauthorized: 401,
  insufficient_credits: 402,
  spend_limit_exceeded: 402,
  forbidden: 403,
  tenant_not_active: 403,
  scene_sessions_not_enabled: 403,
  clip_library_not_enabled: 403,
  // Live calls: record: true asked of a workspace whose recording policy is off.
  recordings_not_enabled: 403,
  // POST /realtime/livekit/join without an Origin, or from one its workspace does not allow.
  origin_not_allowed: 403,
  not_found: 404,
  scene_not_found: 404,
  // POST /realtime/livekit/join: a token never issued (or purged); one redeemed already; one past
  // its expiry, or whose call has ended.
  join_token_not_found: 404,
  join_token_used: 410,
  join_token_expired: 410,
  method_not_allowed: 405,
  request_aborted: 408,
  workspace_missing: 409,
  idempotency_conflict: 409,
  avatar_state_conflict: 409,
  revision_conflict: 409,
  loop_pending: 409,
  scene_not_ready: 409,
  // DELETE /assets/{id} of an asset a live avatar (its portrait) or a live clip (its source) uses; `usedBy` names them.
  asset_in_use: 409,
  payload_too_large: 413,
  // Request headers over Node's limit, refused by its HTTP parser before the app runs.
  headers_too_large: 431,
  unsupported_media_type: 415,
  range_not_satisfiable: 416,
  validation_error: 422,
  loop_not_generatable: 422,
  loop_prompt_rejected: 422,
  clip_declaration_rejected: 422,
  scene_source_rejected: 422,
  // Assets: bytes of no accepted type; a remote URL refused by the safe fetcher's address rules.
  unsupported_asset_type: 422,
  remote_url_refused: 422,
  // Lipsync: audio ffmpeg cannot decode or longer than the cap; a portrait without a usable face; a
  // signed media URL of this service that has expired.
  invalid_audio: 422,
  audio_too_long: 422,
  portrait_rejected: 422,
  media_url_expired: 422,
  concurrency_limit_reached: 429,
  scene_concurrency_limit_reached: 429,
  // A per-key rate limit answer carries no code on the wire; see CODELESS.
  rate_limited: 429,
  // The live-call capacity queue: its body is exactly the queue fields (see BARE).
  capacity_queued: 429,
  internal_error: 500,
  upstream_unreachable: 502,
  invalid_upstream_response: 502,
  // A lipsync render that crashed or ran past its time limit.
  render_failed: 502,
  // Realtime: an avatar's media (frame cache) could not be loaded from storage.
  media_unavailable: 502,
  capacity_unavailable: 503,
  session_dispatch_failed: 503,
  clip_screen_unavailable: 503,
  scene_builder_unavailable: 503,
  clip_library_not_ready: 503,
  // A talk turn with no LLM configured (OPENAI_BASE_URL / OPENAI_API_KEY).
  llm_not_configured: 503,
  // GET /readyz: a dependency (the database, Redis, LiveKit) does not answer; `dependencies` says which.
  not_ready: 503,
  upstream_timeout: 504,
  // Recordings: playback access of a recording still processing, one that failed, one past retention.
  recording_not_ready: 409,
  recording_failed: 409,
  recording_expired: 404,
  // The dashboard (docs/dashboard.md): a key whose full value is not kept, or no longer usable.
  key_not_copyable: 409,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** Codes a client may retry without changing anything. */
const RETRYABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'request_aborted',
  'concurrency_limit_reached',
  'scene_concurrency_limit_reached',
  'rate_limited',
  'capacity_queued',
  'scene_not_ready',
  'internal_error',
  'upstream_unreachable',
  'invalid_upstream_response',
  'render_failed',
  'capacity_unavailable',
  'session_dispatch_failed',
  'clip_screen_unavailable',
  'scene_builder_unavailable',
  'clip_library_not_ready',
  'upstream_timeout',
  'recording_not_ready',
  'media_unavailable',
  'not_ready',
]);

/** Codes whose wire body omits `code` (the per-key rate limit 429, told apart from the other 429s by it). */
const CODELESS: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['rate_limited']);

/**
 * Codes whose wire body is exactly their extra fields, nothing else (the capacity-queue 429:
 * `{ queue_ticket_id, queue_size, recommended_retry_ms }`, the request id in the header only).
 */
const BARE: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['capacity_queued']);

export interface ErrorBody {
  error: string;
  status: number;
  code?: string;
  retryable: boolean;
  billingUrl?: string;
  requestId?: string;
  [extra: string]: unknown;
}

export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Extra body fields (for example `field`, `currentRevision`, the concurrency counters). */
    readonly extra: Record<string, unknown> = {},
    /** Extra response headers (for example Retry-After). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }

  get retryable(): boolean {
    return RETRYABLE.has(this.code);
  }

  toBody(requestId?: string, billingUrl?: string): ErrorBody | Record<string, unknown> {
    if (BARE.has(this.code)) return { ...this.extra };
    const body: ErrorBody = { error: this.message, status: this.status, retryable: this.retryable };
    if (!CODELESS.has(this.code)) body.code = this.code;
    if (this.status === 402 && billingUrl) body.billingUrl = billingUrl;
    Object.assign(body, this.extra);
    if (requestId) body.requestId = requestId;
    return body;
  }
}

export const notFound = (what: string) =>
  new ApiError('not_found', `${what} not found, or it does not belong to this tenant`);
