import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_CLIP_IDS } from '../../clips/declaration/default-clips.ts';

/**
 * The one configuration of every process (API, agent worker, admin CLI), read from the environment.
 * A bad value stops start-up with a message naming the variable.
 */
const optionalUrl = z.url().optional();
const emptyAsUndefined = (v: unknown) => (v === '' ? undefined : v);
/** An integer; unset or empty gives the default (z.coerce alone would read "" as 0). */
const envInt = (min: number, fallback: number, max = Number.MAX_SAFE_INTEGER) =>
  z.preprocess(emptyAsUndefined, z.coerce.number().int().min(min).max(max).default(fallback));
/** `true` or `false`; unset or empty gives the default. */
const envBool = (fallback: boolean) =>
  z
    .preprocess(emptyAsUndefined, z.enum(['true', 'false']).default(fallback ? 'true' : 'false'))
    .transform((v) => v === 'true');

const schema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: envInt(0, 8080, 65535),
  HOST: z.string().min(1).default('0.0.0.0'),
  /** Where the embedded PostgreSQL, local object storage and other state live. */
  DATA_DIR: z.string().min(1).default('./data'),
  /** Public origin used in URLs handed to clients (signed media URLs). Defaults to http://localhost:PORT. */
  PUBLIC_BASE_URL: z.preprocess(emptyAsUndefined, optionalUrl),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * A live call's words in the logs: what the user said (its transcripts) and what the avatar answered.
   * Off by default: they are the user's personal data, and an operator turns them on to debug a conversation.
   */
  LOG_TRANSCRIPTS: envBool(false),
  /**
   * Prometheus metrics (`GET /metrics`) on a listener of their own, never on the public port: the
   * API's on METRICS_PORT, an agent worker's on AGENT_METRICS_PORT (two ports, so that both run side
   * by side on one machine); `0` turns that listener off. Both listen on HOST.
   */
  METRICS_PORT: envInt(0, 9464, 65535),
  AGENT_METRICS_PORT: envInt(0, 9465, 65535),

  DATABASE_URL: z.preprocess(emptyAsUndefined, optionalUrl),
  DATABASE_POOL_SIZE: envInt(1, 10, 200),
  REDIS_URL: z.preprocess(emptyAsUndefined, optionalUrl),

  LIVEKIT_URL: z.preprocess(emptyAsUndefined, optionalUrl),
  LIVEKIT_API_KEY: z.preprocess(emptyAsUndefined, z.string().min(1).optional()),
  LIVEKIT_API_SECRET: z.preprocess(emptyAsUndefined, z.string().min(1).optional()),

  OPENAI_API_KEY: z.preprocess(emptyAsUndefined, z.string().min(1).optional()),
  OPENAI_BASE_URL: z.preprocess(emptyAsUndefined, optionalUrl),
  /** Models on the OpenAI-compatible endpoint: speech to text and the conversation's LLM. */
  STT_MODEL: z.string().min(1).default('whisper-1'),
  LLM_MODEL: z.string().min(1).default('gpt-4o-mini'),
  /** An OpenAI-compatible speech model for the avatar's voice; unset: the embedded Flite TTS. */
  TTS_MODEL: z.preprocess(emptyAsUndefined, z.string().min(1).optional()),
  /** Voice of TTS_MODEL when the avatar names none (defaultVoiceId). */
  TTS_VOICE: z.preprocess(emptyAsUndefined, z.string().min(1).optional()),

  /** The agent worker (`npm run agent`): its dispatch name, the capacity pool it serves and how many calls it takes. */
  AGENT_NAME: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, _ or -')
    .default('avatar'),
  CAPACITY_POOL: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'must be 1 to 64 lowercase letters, digits, _ or -')
    .default('primary'),
  AGENT_SLOTS: envInt(1, 4, 1000),
  /**
   * The worker's health endpoint (agents-js's: `GET /` 200 while registered with LiveKit, 503
   * otherwise; `GET /worker` its state in JSON), on HOST. `0`: a port the system picks, logged at start.
   */
  AGENT_HEALTH_PORT: envInt(0, 8081, 65535),
  /** Memory of a worker for decoded frames (I420) of the clips its calls play, all together, MiB. */
  AGENT_FRAME_MEMORY_MB: envInt(64, 2048, 1_000_000),
  /**
   * What a call's audio rides out, ms. rtc-node's audio queue (a multiple of 10): the longest stall
   * of the worker's event loop a call's audio survives without a gap. The speech start: audio a reply
   * holds before it plays, the slack for a sender that streams in real time. Such a reply starts the
   * sum of both later; one sent faster than real time starts in place of the queued silence, at once.
   */
  AGENT_AUDIO_QUEUE_MS: envInt(20, 100, 1000).refine((ms) => ms % 10 === 0, 'must be a multiple of 10'),
  AGENT_SPEECH_START_MS: envInt(0, 100, 1000),
  /**
   * When a live call's voice takes the user's turn as ended (docs/agent.md, "Where the time goes").
   * After AGENT_STT_SILENCE_MS of silence the speech so far goes to STT; a turn whose words read as
   * a question ends after AGENT_QUESTION_TURN_MS of silence, one that reads as another finished
   * sentence after AGENT_FINISHED_TURN_MS, any other after
   * AGENT_TURN_END_MS (all counted by the VAD in the audio itself, in its 32 ms windows: the
   * defaults 96 and 192 are three and six). A pause inside an unfinished
   * sentence of up to 450 ms is never an end of turn: AGENT_TURN_END_MS is raised to 700 where it
   * is shorter (agent/voice/turns.ts).
   * AGENT_PREEMPTIVE_TTS: the reply's LLM and TTS start on the transcript, before the turn has ended
   * (thrown away if the user goes on). AGENT_TTS_CLAUSES: the embedded TTS speaks the first clause
   * of a reply as soon as it is written, rather than its whole first sentence.
   */
  AGENT_STT_SILENCE_MS: envInt(64, 96, 2000),
  /**
   * The frames the voice job takes the user's audio in, ms (a multiple of 10): each frame costs the
   * job's main thread an FFI event and a pass through its streams, so 30 ms frames cost it about a
   * third less CPU than rtc-node's 10 (agent/voice/user-audio.ts).
   */
  AGENT_USER_AUDIO_FRAME_MS: envInt(10, 30, 100).refine((ms) => ms % 10 === 0, 'must be a multiple of 10'),
  AGENT_QUESTION_TURN_MS: envInt(100, 192, 5000),
  AGENT_FINISHED_TURN_MS: envInt(100, 300, 5000),
  AGENT_TURN_END_MS: envInt(100, 700, 5000),
  AGENT_PREEMPTIVE_TTS: envBool(true),
  AGENT_TTS_CLAUSES: envBool(true),
  /**
   * The niceness a spare voice process starts and waits at, below the calls' processes (0: the
   * same); it gets the normal priority back when a call takes it. Only where the worker may give
   * it back (CAP_SYS_NICE, or a nice limit of 20); otherwise spares start at normal priority
   * (agent/spare-processes.ts).
   */
  AGENT_SPARE_NICE: envInt(0, 10, 19),
  /**
   * The codec of a live call's video. H.264 (Constrained Baseline, which every WebRTC browser must
   * decode, RFC 7742) takes about half the CPU of VP8 to encode here (docs/benchmarks.md), so a
   * worker carries more calls.
   */
  AGENT_VIDEO_CODEC: z.preprocess(emptyAsUndefined, z.enum(['h264', 'vp8']).default('h264')),
  /** Where the worker renders: onnxruntime's CPU provider, or CUDA on GPU hosts. */
  RENDER_DEVICE: z.enum(['cpu', 'cuda']).default('cpu'),
  /**
   * Threads a worker draws its calls' mouths in, each batch dealt out among them. Two on the 2-core
   * reference machine keep speaking frames drawn in time where one thread falls behind (docs/benchmarks.md).
   */
  AGENT_LIPSYNC_THREADS: envInt(1, 2, 64),
  /** A call whose user has not joined this long after the avatar did ends, unbilled. */
  USER_JOIN_TIMEOUT_SECONDS: envInt(5, 120, 3600),
  /** On SIGTERM, how long the worker lets its calls finish before it ends them. */
  AGENT_DRAIN_SECONDS: envInt(0, 600, 86_400),

  /** Scenes (docs/scenes.md): how long a prepared scene is kept after its last POST, 1 minute to 1 year (default 7 days). */
  SCENE_TTL_SECONDS: envInt(60, 7 * 86_400, 365 * 86_400),
  /** Largest scene clip downloaded, bytes (default 100 MB). */
  SCENE_MAX_BYTES: envInt(1_000_000, 100_000_000, 2_000_000_000),
  /** Longest scene clip, seconds (default 60). */
  SCENE_MAX_SECONDS: envInt(1, 60, 600),
  /** A scene's picture fits in a square of this side, its aspect kept (even, 64 to 1280; default 512). */
  SCENE_FRAME_SIZE: z.preprocess(
    emptyAsUndefined,
    z.coerce.number().int().min(64).max(1280).multipleOf(2, 'must be even').default(512),
  ),
  /** Recordings (docs/recordings.md): a recording still processing this long after its call ended is failed (the worker died). */
  RECORDING_FINALIZE_TIMEOUT_SECONDS: envInt(60, 1800, 86_400),
  /** How often the media janitor jobs run: recordings past retention, unfinished recordings, expired scenes. */
  MEDIA_SWEEP_SECONDS: envInt(10, 300, 86_400),
  /** Live calls (docs/live-sessions.md). LiveKit as clients reach it, the grant's server_url; default LIVEKIT_URL. */
  LIVEKIT_PUBLIC_URL: z.preprocess(emptyAsUndefined, optionalUrl),
  /** A mint without max_duration_seconds asks for this long; a mint may ask for at most LIVE_MAX_DURATION_SECONDS. */
  LIVE_DEFAULT_MAX_DURATION_SECONDS: envInt(1, 600, 86_400),
  LIVE_MAX_DURATION_SECONDS: envInt(1, 14_400, 86_400),
  /** Credits short of the asked duration shorten the call, but never below this many seconds (402 instead). */
  LIVE_MIN_RESERVATION_SECONDS: envInt(1, 30, 3600),
  /** A minted call whose avatar has not joined this long after the mint ends `failed` (the room's empty timeout too). */
  LIVE_JOIN_TIMEOUT_SECONDS: envInt(5, 60, 3600),
  /**
   * A joined call whose worker has not been heard from this long ends `worker_lost` (the janitor),
   * billed to its last heartbeat. Workers heartbeat each call six times in that span.
   */
  LIVE_HEARTBEAT_TIMEOUT_SECONDS: envInt(3, 60, 3600),
  /** Lifetime of the user's participant token: the time the client has to join. */
  LIVE_TOKEN_TTL_SECONDS: envInt(30, 600, 86_400),
  /** A capacity-queue ticket not sent back on a mint within this long leaves the queue. */
  QUEUE_TICKET_TTL_SECONDS: envInt(2, 30, 3600),
  /** Prefix of every Redis key of this deployment (several deployments can share one Redis). */
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9:_.-]{0,64}$/, 'must be at most 64 letters, digits, :, _, . or -')
    .default('avatar:'),
  /** Realtime turns (docs/realtime.md): the longest spoken reply of a talk turn, in seconds; also what a talk turn reserves. */
  TURN_TALK_MAX_SECONDS: envInt(5, 60, 600),
  /**
   * How long the LLM may take to its first token, or between two tokens, before a turn gives up (504
   * upstream_timeout), and before a live call's avatar retries once, then says it cannot answer.
   */
  LLM_TIMEOUT_SECONDS: envInt(1, 20, 300),
  /** How long speech to text may take over one utterance of a live call before the utterance is dropped (the call goes on). */
  STT_TIMEOUT_SECONDS: envInt(1, 15, 300),
  /**
   * A turn's client that reads nothing for this long while the stream waits is stalled: the rest of
   * the turn is dropped, and the stream ends with an ERROR record; its connection is dropped if it
   * takes nothing of that record for as long again.
   */
  TURN_STALL_SECONDS: envInt(1, 30, 600),
  /** Avatars' frame caches each API process holds open for turns; the least recently used one goes first. */
  REALTIME_MEDIA_CACHE_SIZE: envInt(1, 16, 1000),

  S3_ENDPOINT: z.preprocess(emptyAsUndefined, optionalUrl),
  S3_BUCKET: z.preprocess(emptyAsUndefined, z.string().min(1).optional()),
  S3_REGION: z.preprocess(emptyAsUndefined, z.string().min(1).optional()),
  S3_ACCESS_KEY_ID: z.preprocess(emptyAsUndefined, z.string().min(1).optional()),
  S3_SECRET_ACCESS_KEY: z.preprocess(emptyAsUndefined, z.string().min(1).optional()),
  /** Secret behind signed local media URLs (share it between API processes); default: DATA_DIR/media-signing.secret, made once. */
  MEDIA_SIGNING_SECRET: z.preprocess(emptyAsUndefined, z.string().min(16).optional()),

  /** ffmpeg binary; defaults to the static build from the @ffmpeg-installer npm package (run as a subprocess only). */
  FFMPEG_PATH: z.preprocess(emptyAsUndefined, z.string().min(1).optional()),

  /** Lip-sync engine: `builtin` (the ONNX mouth synthesis) or a path to a Wav2Lip-class ONNX model. */
  LIPSYNC_MODEL: z.preprocess(emptyAsUndefined, z.string().min(1).default('builtin')),

  /** Avatar background jobs (core/jobs, pg-boss): worker concurrency in the API process (0: none), retries, expiry. */
  JOB_WORKERS: envInt(0, 1, 16),
  JOB_RETRY_LIMIT: envInt(0, 3, 20),
  JOB_RETRY_DELAY_SECONDS: envInt(1, 10, 3600),
  /** A job running longer is failed and retried; also how long a crashed worker's job waits before it is retried. */
  JOB_EXPIRE_SECONDS: envInt(2, 1800, 86_400),
  JOB_MAINTENANCE_SECONDS: envInt(1, 30, 3600),
  JOB_POLL_SECONDS: envInt(1, 2, 60),
  /** Length of a generated idle loop (seconds). */
  AVATAR_LOOP_SECONDS: envInt(2, 8, 30),
  /**
   * The default motion library generated after an avatar's first idle loop publishes: a comma list of
   * clip ids of clips/declaration/default-clips.ts (default: all of them); empty generates none.
   */
  DEFAULT_MOTION_CLIPS: z.preprocess(
    (v) => (v === undefined ? DEFAULT_CLIP_IDS.join(',') : v),
    z
      .string()
      .transform((v) =>
        v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      )
      .refine(
        (ids) => ids.every((id) => DEFAULT_CLIP_IDS.includes(id)),
        `must list ids among ${DEFAULT_CLIP_IDS.join(', ')} (comma-separated), or be empty`,
      ),
  ),
  /** Price of one loop generation (PUT /avatars/{id}/loop), in credit micros. */
  LOOP_GENERATION_CREDIT_MICROS: envInt(1, 30_000_000),
  /** OpenAI-compatible moderation endpoint (full URL, e.g. https://api.openai.com/v1/moderations) screening motion prompts. */
  MODERATION_URL: z.preprocess(emptyAsUndefined, optionalUrl),
  /** Bearer key of MODERATION_URL; defaults to OPENAI_API_KEY. */
  MODERATION_API_KEY: z.preprocess(emptyAsUndefined, z.string().min(1).optional()),

  /** POST /lipsync (docs/lipsync.md): longest audio (seconds), largest audio or portrait file (bytes). */
  LIPSYNC_MAX_AUDIO_SECONDS: envInt(1, 120, 600),
  LIPSYNC_MAX_AUDIO_BYTES: envInt(1024, 50 * 1024 * 1024, 200 * 1024 * 1024),
  LIPSYNC_MAX_PORTRAIT_BYTES: envInt(1024, 20 * 1024 * 1024, 50 * 1024 * 1024),
  /** Whole lipsync request (downloads, portrait registration, render) past which it fails with 502 render_failed. */
  LIPSYNC_TIMEOUT_SECONDS: envInt(10, 300, 3600),
  /** Lipsync renders running at once in this process (each in a child process); more wait their turn. */
  LIPSYNC_CONCURRENCY: envInt(1, 2, 64),
  /** Length of the idle loop generated for a portrait registered by a lipsync request. */
  LIPSYNC_PORTRAIT_LOOP_SECONDS: envInt(2, 4, 30),

  /**
   * How long the API waits for what a client sends (docs/api.md, "Slow and cut-off requests"); past
   * each, 408 request_aborted and the connection closes. The whole head of a request (at most 16 KiB)
   * within HTTP_HEADERS_TIMEOUT_SECONDS; the whole request within HTTP_REQUEST_TIMEOUT_SECONDS (900 s:
   * the largest asset, 50 MiB, uploads at 0.5 Mbit/s); and a body stalls when it sends fewer than
   * HTTP_BODY_MIN_BYTES_PER_SECOND (Apache mod_reqtimeout's default rate) over any
   * HTTP_BODY_STALL_SECONDS, so a body trickled a byte at a time holds no connection for long.
   */
  HTTP_HEADERS_TIMEOUT_SECONDS: envInt(1, 10, 3600),
  HTTP_REQUEST_TIMEOUT_SECONDS: envInt(1, 900, 86_400),
  HTTP_BODY_STALL_SECONDS: envInt(1, 10, 3600),
  HTTP_BODY_MIN_BYTES_PER_SECOND: envInt(0, 500, 1_000_000_000),

  /** Per-key request throttle: 120 requests per 60 s by default (docs/api.md, "Rate limit"). */
  RATE_LIMIT_POINTS: envInt(1, 120),
  RATE_LIMIT_WINDOW_SECONDS: envInt(1, 60),
  /**
   * Failed authentications (401) per client address (IPv6: per /64) per window, 30 per 60 s by
   * default: past it every request from that address is 429 until the window ends, answered before
   * any key lookup (docs/api.md, "Rate limit").
   */
  AUTH_FAILURE_LIMIT_POINTS: envInt(1, 30),
  AUTH_FAILURE_LIMIT_WINDOW_SECONDS: envInt(1, 60),
  /**
   * The dashboard (docs/dashboard.md). The secret its kept keys are encrypted with (AES-256-GCM; share
   * it between API processes); default: DATA_DIR/dashboard-secret.key, made once. How long a sign-in
   * link can be redeemed, and how long a session lasts.
   */
  DASHBOARD_SECRET_KEY: z.preprocess(emptyAsUndefined, z.string().min(16).optional()),
  DASHBOARD_LINK_MINUTES: envInt(1, 15, 7 * 24 * 60),
  DASHBOARD_SESSION_HOURS: envInt(1, 12, 30 * 24),
  /** Relative billing URL put on 402 errors. */
  BILLING_URL: z.string().min(1).default('/platform/billing'),
});

/** Every variable the processes read (the README's configuration table documents each). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(schema.shape);

export type Config = z.infer<typeof schema> & { dataDir: string; publicBaseUrl: string };

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const c = parsed.data;
  const livekit = [c.LIVEKIT_URL, c.LIVEKIT_API_KEY, c.LIVEKIT_API_SECRET];
  if (livekit.some(Boolean) && !livekit.every(Boolean)) {
    throw new ConfigError(
      'Invalid configuration:\n  LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET must be set together',
    );
  }
  // Node's HTTP server refuses a head timeout longer than the whole request's.
  if (c.HTTP_HEADERS_TIMEOUT_SECONDS > c.HTTP_REQUEST_TIMEOUT_SECONDS) {
    throw new ConfigError(
      'Invalid configuration:\n  HTTP_HEADERS_TIMEOUT_SECONDS must not exceed HTTP_REQUEST_TIMEOUT_SECONDS',
    );
  }
  return {
    ...c,
    dataDir: path.resolve(c.DATA_DIR),
    publicBaseUrl: (c.PUBLIC_BASE_URL ?? `http://localhost:${c.PORT}`).replace(/\/$/, ''),
  };
}

/** For a process entry point: the config, or the reasons on stderr and exit code 2. */
export function loadConfigOrExit(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
}
