/**
 * The agent worker: registers with LiveKit under AGENT_NAME, declares its call slots for its
 * capacity pool, and takes the calls LiveKit dispatches to it.
 *
 * For each dispatched call, this process (which holds the one renderer) starts the call's avatar:
 * it joins the room as the avatar and publishes its video and audio. A conversation-mode call also
 * gets a voice agent in an agents-js job process (agent/voice/job.ts) that speaks to the avatar over
 * LiveKit's avatar protocol; a provider-mode call's avatar speaks for the customer's agent instead.
 * The call's lifecycle goes to the database (core/live), where the API settles it (agent/calls.ts
 * runs each call).
 */
import { hostname } from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { AgentServer, ServerOptions, type JobRequest, type VAD } from '@livekit/agents';
import * as silero from '@livekit/agents-plugin-silero';
import type { Config } from '../core/platform/config.ts';
import { newId } from '../core/platform/ids.ts';
import { freePort } from '../core/platform/net/free-port.ts';
import { heartbeatIntervalMs, LiveSessionStore } from '../core/live/sessions.ts';
import { AgentWorkerRegistry, type WorkerDeclaration } from '../core/live/workers.ts';
import type { Logger } from '../core/platform/log.ts';
import { RecordingStore } from '../core/recordings/store.ts';
import type { Services } from '../core/wiring/services.ts';
import { createFrameDecoderThread } from '../render/framecache/index.ts';
import { createLipSyncThreads, type LipSyncEngine } from '../render/lipsync/index.ts';
import { createAudioVisemeThread } from '../render/visemes/index.ts';
import { agentsLogLevel, initAgentsLogger } from './agents-logs.ts';
import { AvatarHost } from './avatar/host.ts';
import { warmCallPath } from './avatar/warm.ts';
import { runCall, type CallStores } from './calls.ts';
import { quietRtcLogs } from './rtc-logs.ts';
import { delaySpareProcesses, niceSpareProcesses, SPARE_START_DELAY_MS } from './spare-processes.ts';
import { parseDispatchMetadata } from './voice/job.ts';
import { bundleForProcesses, withoutTsx } from './voice/job-bundle.ts';

const VOICE_JOB = fileURLToPath(new URL('./voice/job.ts', import.meta.url));
const DECLARE_EVERY_MS = 10_000;
/** A call that reaches the worker this long after its mint is logged (a user has been waiting). */
const LATE_DISPATCH_MS = 5_000;
/**
 * LiveKit offers a worker jobs while its reported load is under the server's target (0.7 by
 * default): the load reported is scaled so that it reaches that target exactly when every slot is taken.
 */
const LIVEKIT_TARGET_LOAD = 0.7;
/** Consecutive failed connections to LiveKit before the worker gives up (about 5 minutes). */
const LIVEKIT_RECONNECT_ATTEMPTS = 35;

/** What the worker needs of the process's services (core's Services is one). */
export type AgentDeps = Pick<Services, 'config' | 'log' | 'sql' | 'storage' | 'usage'>;

export interface AgentWorkerOptions {
  log?: Logger;
  /** Test and benchmark aids passed to the avatar host. */
  syncMarker?: boolean;
  /** Job processes kept warm for conversation calls (each boots in seconds). Default 1. */
  idleProcesses?: number;
}

export interface AgentWorker {
  id: string;
  host: AvatarHost;
  /** Rejects when the worker stops on its own: LiveKit unreachable for longer than it retries. */
  stopped: Promise<void>;
  /** Stops taking calls, lets the calls in progress finish for up to `timeoutMs`, then ends the rest and leaves LiveKit. */
  drain(timeoutMs: number): Promise<void>;
}

/**
 * The voice job that agents-js's processes load: bundled, so that they boot without tsx (about 1.5 s
 * less CPU per call start, job-bundle.ts), or the source itself under the worker's own flags when
 * bundling fails. agents-js forks with `process.execArgv`, so tsx's flags leave it here.
 */
async function voiceJobEntry(log: Logger): Promise<string> {
  try {
    const bundle = await bundleForProcesses(VOICE_JOB);
    process.execArgv.splice(0, process.execArgv.length, ...withoutTsx(process.execArgv));
    return bundle;
  } catch (err) {
    log.warn({ err }, 'voice job not bundled: its processes compile it as they boot');
    return VOICE_JOB;
  }
}

export async function startAgentWorker(deps: AgentDeps, opts: AgentWorkerOptions = {}): Promise<AgentWorker> {
  const { config } = deps;
  const log = (opts.log ?? deps.log).child({ component: 'agent' });
  const livekit = liveKitOf(config);
  initAgentsLogger({ level: config.LOG_LEVEL, transcripts: config.LOG_TRANSCRIPTS });
  // Before any connection, and before the voice job processes are forked (they inherit RUST_LOG).
  quietRtcLogs(config.LOG_LEVEL);

  await warmProcessStats();
  await delaySpareProcesses(SPARE_START_DELAY_MS, log);
  await niceSpareProcesses(config.AGENT_SPARE_NICE, log);
  const voiceJob = await voiceJobEntry(log);
  const { host, release } = await startHost(deps, livekit, log, opts);
  const stores: CallStores = {
    sql: deps.sql,
    live: new LiveSessionStore(deps.sql, deps.usage),
    recordings: new RecordingStore(deps.sql),
  };
  const registry = new AgentWorkerRegistry(deps.sql);
  const id = newId('worker');
  const state = { draining: false };
  const declaring = await declareWorker(
    registry,
    { id, capacityPool: config.CAPACITY_POOL, slots: config.AGENT_SLOTS, hostname: hostname() },
    state,
    log,
  );

  const healthPort = config.AGENT_HEALTH_PORT || (await freePort());
  const callsRunning = new Set<string>();
  const server = new AgentServer(
    new ServerOptions({
      agent: voiceJob,
      agentName: config.AGENT_NAME,
      wsURL: livekit.url,
      apiKey: livekit.apiKey,
      apiSecret: livekit.apiSecret,
      numIdleProcesses: opts.idleProcesses ?? 1,
      // agents-js's health endpoint (GET / and GET /worker). It reads port 0 as its own default
      // (8081 in production), so "any free port" is drawn here.
      port: healthPort,
      host: config.HOST,
      logLevel: agentsLogLevel(config.LOG_LEVEL),
      production: config.NODE_ENV === 'production',
      loadThreshold: LIVEKIT_TARGET_LOAD,
      loadFunc: async () =>
        state.draining ? 1 : Math.min(1, (LIVEKIT_TARGET_LOAD * host.calls.length) / config.AGENT_SLOTS),
      requestFunc: (req) =>
        takeCall(req, { workerId: id, slots: config.AGENT_SLOTS, host, stores, state, callsRunning, log }),
      // Reconnect through a LiveKit restart or outage of a few minutes (back-off up to 10 s each).
      maxRetry: LIVEKIT_RECONNECT_ATTEMPTS,
    }),
  );
  const registered = new Promise<void>((resolve) => server.event.once('worker_registered' as never, () => resolve()));
  // After a LiveKit outage the worker registers again (agents-js logs it below info): one line each time.
  let registrations = 0;
  server.event.on('worker_registered' as never, () => {
    if (registrations++ > 0) log.info({ workerId: id }, 'agent worker registered again');
  });
  const running = server.run();
  await Promise.race([
    registered,
    running.then(() => Promise.reject(new Error('The agent worker stopped before it registered with LiveKit'))),
  ]);
  log.info(
    {
      workerId: id,
      agentName: config.AGENT_NAME,
      capacityPool: config.CAPACITY_POOL,
      slots: config.AGENT_SLOTS,
      healthPort,
    },
    'agent worker registered',
  );

  return {
    id,
    host,
    stopped: running.then(() => {
      if (!state.draining) throw new Error('The agent worker stopped');
    }),
    drain: async (timeoutMs) => {
      state.draining = true;
      clearInterval(declaring);
      await registry.drain(id).catch(() => {});
      await finishCalls(host, timeoutMs, log);
      await server.close();
      await running.catch(() => {});
      await registry.remove(id).catch(() => {});
      await release();
    },
  };
}

type LiveKitCredentials = { url: string; apiKey: string; apiSecret: string };

function liveKitOf(config: Config): LiveKitCredentials {
  if (!config.LIVEKIT_URL || !config.LIVEKIT_API_KEY || !config.LIVEKIT_API_SECRET) {
    throw new Error('The agent worker needs LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET');
  }
  return { url: config.LIVEKIT_URL, apiKey: config.LIVEKIT_API_KEY, apiSecret: config.LIVEKIT_API_SECRET };
}

/** The host of this worker's calls, with its engines (lip-sync, mouth analysis, VAD); `release` frees the engines' threads. */
async function startHost(
  deps: AgentDeps,
  livekit: LiveKitCredentials,
  log: Logger,
  opts: AgentWorkerOptions,
): Promise<{ host: AvatarHost; release(): Promise<void> }> {
  const { config } = deps;
  const lipsync = await liveLipSync(config, log);
  const mouthAnalysis = await createAudioVisemeThread();
  const frameDecoder = createFrameDecoderThread();
  await warmCallPath({ lipsync, mouthAnalysis, frameDecoder }, log);
  const vad: VAD = await silero.VAD.load();
  const host = new AvatarHost({
    lipsync,
    vad,
    storage: deps.storage,
    livekit,
    log,
    workDir: path.join(config.dataDir, 'agent'),
    userJoinTimeoutMs: config.USER_JOIN_TIMEOUT_SECONDS * 1000,
    frameMemoryBytes: config.AGENT_FRAME_MEMORY_MB * 2 ** 20,
    frameDecoder,
    audioQueueMs: config.AGENT_AUDIO_QUEUE_MS,
    speechStartMs: config.AGENT_SPEECH_START_MS,
    videoCodec: config.AGENT_VIDEO_CODEC,
    mouthAnalysis,
    heartbeatMs: heartbeatIntervalMs(config.LIVE_HEARTBEAT_TIMEOUT_SECONDS),
    ...(opts.syncMarker ? { syncMarker: true } : {}),
  });
  const release = async () => {
    await lipsync.release().catch(() => {});
    await mouthAnalysis.release().catch(() => {});
    await frameDecoder.release().catch(() => {});
  };
  return { host, release };
}

/** Declares the worker's slots now and every DECLARE_EVERY_MS until it drains (the API counts capacity from them). */
async function declareWorker(
  registry: AgentWorkerRegistry,
  declaration: WorkerDeclaration,
  state: { draining: boolean },
  log: Logger,
): Promise<NodeJS.Timeout> {
  await registry.declare(declaration);
  return setInterval(() => {
    if (!state.draining)
      registry.declare(declaration).catch((err: unknown) => log.warn({ err }, 'could not declare the worker'));
  }, DECLARE_EVERY_MS);
}

interface CallIntake {
  workerId: string;
  slots: number;
  host: AvatarHost;
  stores: CallStores;
  state: { draining: boolean };
  /** The sessions this worker runs (taken, not yet ended). */
  callsRunning: Set<string>;
  log: Logger;
}

/** LiveKit offers a call: taken when a slot is free and the session is ours to claim; its avatar starts as the job is accepted. */
async function takeCall(req: JobRequest, intake: CallIntake): Promise<void> {
  const { host, stores, log } = intake;
  const receivedAt = Date.now();
  const meta = parseDispatchMetadata(req.job.metadata);
  if (!meta || intake.state.draining || host.calls.length >= intake.slots) return req.reject();
  // A call the API dispatched again (core/live/calls.ts) that reached the worker already running it.
  if (intake.callsRunning.has(meta.session_id)) return req.reject();
  const session = await stores.live.claim(meta.session_id, intake.workerId).catch((err: unknown) => {
    log.error({ err }, 'could not claim a dispatched call');
    return undefined;
  });
  // Ended before it got here (released), unknown, or another worker's: not ours to run.
  if (!session) return req.reject();
  // The caller waits from the mint: a dispatch that took seconds is worth a line. dispatchMs is
  // LiveKit's part (mint to job request; its room log tells why), claimMs the database's.
  const claimMs = Date.now() - receivedAt;
  const dispatchMs = receivedAt - session.createdAt.getTime();
  if (dispatchMs + claimMs > LATE_DISPATCH_MS)
    log.warn({ sessionId: session.id, room: session.roomName, dispatchMs, claimMs }, 'call dispatched late');
  // Accept at once (LiveKit waits on the answer); the avatar starts meanwhile. The job process
  // becomes the call's voice agent, or (provider mode) ends at once: the avatar needs no job.
  intake.callsRunning.add(session.id);
  void runCall(stores, host, session, log).finally(() => intake.callsRunning.delete(session.id));
  const identity =
    session.mode === 'conversation'
      ? (session.agentIdentity ?? `agent-${session.id}`)
      : `${session.avatarIdentity}-dispatch`;
  await req.accept('voice', identity);
}

/** Lets the calls in progress finish for up to `timeoutMs`, then ends the rest and closes the host. */
async function finishCalls(host: AvatarHost, timeoutMs: number, log: Logger): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (host.calls.length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  if (host.calls.length > 0) log.info({ calls: host.calls.length }, 'drain time is up, ending the remaining calls');
  await host.close('worker_shutdown');
}

/**
 * The lip-sync engine of live calls: LIPSYNC_MODEL's, on RENDER_DEVICE, in AGENT_LIPSYNC_THREADS
 * threads of its own (the event loop stays free for audio and publishing). A neural model's frames
 * carry their audio to those threads, which compute each mel window there.
 */
async function liveLipSync(config: Config, log: Logger): Promise<LipSyncEngine> {
  const engine = await createLipSyncThreads(
    config.LIPSYNC_MODEL,
    { executionProvider: config.RENDER_DEVICE },
    config.AGENT_LIPSYNC_THREADS,
  );
  log.info(
    {
      lipsync: engine.kind,
      model: config.LIPSYNC_MODEL,
      device: config.RENDER_DEVICE,
      threads: config.AGENT_LIPSYNC_THREADS,
    },
    'lip-sync engine loaded',
  );
  return engine;
}

/**
 * agents-js reads its job processes' memory with pidusage every 5 s, whose first reading runs
 * `getconf` twice through child_process: two spawns that block this process's event loop (about
 * 140 ms here), and skipped frames of the first call. Read once at start-up, the figures it needs
 * are kept for good.
 */
async function warmProcessStats(): Promise<void> {
  const pidusage = createRequire(import.meta.url)('pidusage') as (pid: number) => Promise<unknown>;
  await pidusage(process.pid).catch(() => {});
}
