import path from 'node:path';
import { Redis } from 'ioredis';
import { AuthFailureThrottle } from '../auth/failure-throttle.ts';
import { KeyStore } from '../auth/key-store.ts';
import type { Config } from '../platform/config.ts';
import { memoryRateLimiter, redisRateLimiter, type RateLimiter } from '../platform/coord/rate-limiter.ts';
import { CreditLedger } from '../credits/ledger.ts';
import { openDatabase, type Database, type Sql } from '../platform/db/index.ts';
import { IdempotencyStore } from '../idempotency.ts';
import { createLogger, type Logger } from '../platform/log.ts';
import { createMetricsRegistry, type Registry } from '../platform/metrics.ts';
import { TenantStore } from '../tenants.ts';
import { UsageStore } from '../usage.ts';
import { AvatarService, createPromptScreen, type PortraitAssets } from '../avatars/index.ts';
import { ClipLibrary } from '../avatars/clip-library.ts';
import { createJobQueue, type JobQueue } from '../platform/jobs/index.ts';
import { createStorage, type ObjectStorage } from '../platform/storage/index.ts';
import { AssetStore } from '../assets/index.ts';
import { SafeFetcher } from '../platform/net/safe-fetch.ts';
import { LipsyncService } from '../lipsync/index.ts';
import { RecordingLibrary } from '../recordings/library.ts';
import { sceneBuilderCheck } from '../scenes/builder.ts';
import { SceneService } from '../scenes/service.ts';
import { memoryCapacity, redisCapacity } from '../platform/coord/capacity.ts';
import { newId } from '../platform/ids.ts';
import { LiveCalls } from '../live/calls.ts';
import { LiveCapacity } from '../live/capacity.ts';
import { LiveKit } from '../live/livekit.ts';
import { LiveSessionStore } from '../live/sessions.ts';
import { AgentWorkerRegistry } from '../live/workers.ts';
import {
  ChatModel,
  ConversationStore,
  llmConfigured,
  RealtimeMedia,
  TurnService,
  VideoCachePlanner,
} from '../realtime/index.ts';
import { DashboardAuth } from '../dashboard/auth.ts';
import { KeyVault, loadDashboardSecret } from '../dashboard/vault.ts';
import { FliteEngine } from '../../render/tts/index.ts';

/**
 * Everything a request handler, the agent worker or the CLI needs, built once per process.
 * Coordination goes through Redis when REDIS_URL is set and through in-process implementations of
 * the same interfaces otherwise (single process only).
 */
export interface Services {
  config: Config;
  log: Logger;
  /** This process's Prometheus metrics (served on METRICS_PORT by the API, AGENT_METRICS_PORT by a worker). */
  metrics: Registry;
  sql: Sql;
  redis?: Redis;
  tenants: TenantStore;
  keys: KeyStore;
  ledger: CreditLedger;
  usage: UsageStore;
  idempotency: IdempotencyStore;
  rateLimiter: RateLimiter;
  /** Failed authentications per client address (made-up keys): blocks a client past its bound. */
  authFailures: AuthFailureThrottle;
  storage: ObjectStorage;
  /** Tenant assets (rows and bytes): get(tenantId, id), openStream, readBytes. */
  assets: AssetStore;
  /** The one way to fetch a user-supplied URL (address rules, redirects, timeouts, size cap). */
  safeFetch: SafeFetcher;
  /** Durable background jobs (pg-boss); started lazily on first use. */
  jobs: JobQueue;
  /** What avatars read of assets (a tenant's asset, its bytes). */
  portraitAssets: PortraitAssets;
  avatars: AvatarService;
  /** GET/PUT /avatars/{id}/clips: the clip-library envelope and declarations. */
  clipLibrary: ClipLibrary;
  /** POST /lipsync: audio lip-synced over an avatar's idle loop, rendered in child processes. */
  lipsync: LipsyncService;
  /** POST/GET /scenes, and the expiry sweep of scenes. */
  scenes: SceneService;
  /** GET /recordings (metadata, playback access), and the retention sweep. */
  recordings: RecordingLibrary;
  /** Live calls: the session rows (the one way a call ends), the agent workers, capacity slots and queue. */
  liveSessions: LiveSessionStore;
  agentWorkers: AgentWorkerRegistry;
  capacity: LiveCapacity;
  /** The LiveKit server, when configured (LIVEKIT_URL and its key and secret). */
  livekit?: LiveKit;
  /** Mint, release, webhooks and the janitor's sweep of live calls. */
  liveCalls: LiveCalls;
  /** This process's realtime renderer: the lip-sync engine and the avatars' open frame caches. */
  realtimeMedia: RealtimeMedia;
  /** POST /realtime/prepare and /realtime/turn. */
  turns: TurnService;
  /** POST /realtime/video-cache/plan. */
  videoCache: VideoCachePlanner;
  /** The dashboard's sign-in links and sessions, and the keys made there (docs/dashboard.md). */
  dashboard: DashboardAuth;
  close(): Promise<void>;
}

export function connectRedis(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: 2, enableAutoPipelining: true, lazyConnect: false });
}

export interface CreateServicesOptions {
  log?: Logger;
  /** An already open database (tests share one cluster); otherwise opened from config. */
  database?: Database;
  /** Subscribe to key invalidations and ended calls (API processes do; one-shot CLI commands need not). */
  listen?: boolean;
}

export async function createServices(config: Config, opts: CreateServicesOptions = {}): Promise<Services> {
  const log = opts.log ?? createLogger(config.LOG_LEVEL);
  const db = opts.database ?? (await openDatabase(config, log));
  const redis = config.REDIS_URL ? connectRedis(config.REDIS_URL) : undefined;
  const limits = {
    points: config.RATE_LIMIT_POINTS,
    windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS,
    keyPrefix: `${config.REDIS_KEY_PREFIX}rl`,
  };
  const keys = new KeyStore(db.sql, log);
  const authFailureLimits = {
    points: config.AUTH_FAILURE_LIMIT_POINTS,
    windowSeconds: config.AUTH_FAILURE_LIMIT_WINDOW_SECONDS,
    keyPrefix: `${config.REDIS_KEY_PREFIX}authfail`,
  };
  const authFailures = new AuthFailureThrottle(
    redis ? redisRateLimiter(redis, authFailureLimits) : memoryRateLimiter(authFailureLimits),
    log,
  );
  if (opts.listen) await keys.listen();
  const ledger = new CreditLedger(db.sql);
  const usage = new UsageStore(db.sql, ledger);
  const storage = createStorage(config);
  const safeFetch = new SafeFetcher();
  const jobs = createJobQueue(config, db.url, log);
  const assets = new AssetStore(db.sql, storage);
  // Avatars read portraits through the asset store (its get and readBytes).
  const portraitAssets: PortraitAssets = assets;
  const screen = createPromptScreen(config, log);
  const clipLibrary = new ClipLibrary({ sql: db.sql, jobs, storage, assets: portraitAssets, screen });
  const avatars = new AvatarService({
    sql: db.sql,
    jobs,
    storage,
    assets: portraitAssets,
    screen,
    usage,
    log,
    loopPriceCreditMicros: config.LOOP_GENERATION_CREDIT_MICROS,
    multilingualTts: Boolean(config.TTS_MODEL),
  });
  const lipsync = new LipsyncService({
    sql: db.sql,
    storage,
    assets,
    avatars,
    usage,
    // Read through the service, not captured: tests swap the fetcher (an allowlisted loopback origin).
    get safeFetch() {
      return services.safeFetch;
    },
    log,
    cacheDir: path.join(config.dataDir, 'cache', 'framecaches'),
    limits: {
      maxAudioSeconds: config.LIPSYNC_MAX_AUDIO_SECONDS,
      maxAudioBytes: config.LIPSYNC_MAX_AUDIO_BYTES,
      maxPortraitBytes: config.LIPSYNC_MAX_PORTRAIT_BYTES,
      timeoutSeconds: config.LIPSYNC_TIMEOUT_SECONDS,
      concurrency: config.LIPSYNC_CONCURRENCY,
      portraitLoopSeconds: config.LIPSYNC_PORTRAIT_LOOP_SECONDS,
      lipsyncModel: config.LIPSYNC_MODEL,
    },
  });
  const scenes = new SceneService({
    sql: db.sql,
    jobs,
    storage,
    log,
    ttlSeconds: config.SCENE_TTL_SECONDS,
    maxBytes: config.SCENE_MAX_BYTES,
    builderProblem: sceneBuilderCheck(config.FFMPEG_PATH),
  });
  const recordings = new RecordingLibrary({
    sql: db.sql,
    storage,
    log,
    finalizeTimeoutSeconds: config.RECORDING_FINALIZE_TIMEOUT_SECONDS,
  });
  const liveSessions = new LiveSessionStore(db.sql, usage);
  const agentWorkers = new AgentWorkerRegistry(db.sql);
  const capacityOptions = { ticketTtlMs: config.QUEUE_TICKET_TTL_SECONDS * 1000, prefix: config.REDIS_KEY_PREFIX };
  const ticketIds = () => newId('queueTicket');
  const capacity = new LiveCapacity(
    db.sql,
    redis ? redisCapacity(redis, capacityOptions, ticketIds) : memoryCapacity(capacityOptions, ticketIds),
    agentWorkers,
    log,
  );
  if (opts.listen) await capacity.listen();
  const livekit = LiveKit.fromConfig(config);
  const liveCalls = new LiveCalls({ sql: db.sql, config, log, usage, sessions: liveSessions, capacity, livekit });
  const realtimeMedia = new RealtimeMedia({
    storage,
    dir: path.join(config.dataDir, 'realtime-media'),
    capacity: config.REALTIME_MEDIA_CACHE_SIZE,
    lipsyncModel: config.LIPSYNC_MODEL,
    device: config.RENDER_DEVICE,
    log,
  });
  const idempotency = new IdempotencyStore(db.sql);
  // Two synthesis threads: concurrent turns take turns on them sentence by sentence.
  const turnTts = new FliteEngine({ workers: 2 });
  const turns = new TurnService({
    sql: db.sql,
    config,
    usage,
    ledger,
    media: realtimeMedia,
    conversations: new ConversationStore(db.sql),
    log: log.child({ component: 'turns' }),
    tts: turnTts,
    ...(llmConfigured(config) ? { chat: new ChatModel(config) } : {}),
  });
  const videoCache = new VideoCachePlanner({ sql: db.sql, jobs, storage, log });
  let vault: KeyVault | undefined;
  const dashboard = new DashboardAuth(
    db.sql,
    keys,
    () => (vault ??= new KeyVault(loadDashboardSecret(config.dataDir, config.DASHBOARD_SECRET_KEY))),
    { linkTtlMinutes: config.DASHBOARD_LINK_MINUTES, sessionTtlHours: config.DASHBOARD_SESSION_HOURS },
    log,
  );
  // In order: the jobs (their workers use everything else), the key listener, then the pools and,
  // last, the database. Once: a second call waits for the first.
  let closed: Promise<void> | undefined;
  const close = async () => {
    await jobs.stop();
    lipsync.close();
    await keys.close();
    await capacity.close();
    await safeFetch.close();
    await realtimeMedia.close();
    await turnTts.close();
    redis?.disconnect();
    if (!opts.database) await db.close();
  };
  const services: Services = {
    config,
    log,
    metrics: createMetricsRegistry(),
    sql: db.sql,
    redis,
    tenants: new TenantStore(db.sql),
    keys,
    ledger,
    usage,
    idempotency,
    rateLimiter: redis ? redisRateLimiter(redis, limits) : memoryRateLimiter(limits),
    authFailures,
    storage,
    assets,
    safeFetch,
    jobs,
    portraitAssets,
    avatars,
    clipLibrary,
    lipsync,
    scenes,
    recordings,
    liveSessions,
    agentWorkers,
    capacity,
    livekit,
    liveCalls,
    realtimeMedia,
    turns,
    videoCache,
    dashboard,
    close: () => (closed ??= close()),
  };
  return services;
}
