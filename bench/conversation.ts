import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { initializeLogger } from '@livekit/agents';
import {
  AudioSource,
  AudioStream,
  LocalAudioTrack,
  Room,
  RoomEvent,
  TrackKind,
  TrackPublishOptions,
  TrackSource,
  VideoBufferType,
  VideoStream,
  dispose,
  type RemoteTrack,
} from '@livekit/rtc-node';
import { createApp } from '../api/app.ts';
import { startApiServer } from '../api/server.ts';
import { LIVEKIT_WEBHOOK_PATH } from '../api/routes/webhooks/livekit.ts';
import { MICROS_PER_SECOND } from '../core/credits/ledger.ts';
import { loadConfig } from '../core/platform/config.ts';
import { startEmbeddedPostgres } from '../core/platform/db/embedded.ts';
import { freePort } from '../core/platform/net/free-port.ts';
import { createLogger } from '../core/platform/log.ts';
import { orAfter } from '../core/platform/time.ts';
import { createServices } from '../core/wiring/services.ts';
import { closeTts } from '../render/tts/index.ts';
import { Microphone, speech, startWorkerProcess, type WorkerProcess } from '../agent/test-support.ts';
import { quietRtcLogs } from '../agent/rtc-logs.ts';
import { LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET, startLiveKit } from '../test/deps.ts';
import { startFakeOpenAI, wavSeconds, type FakeOpenAI } from '../test/fakes/openai.ts';
import { readyAvatar } from '../test/realtime.ts';
import { quantile } from './lib/load.ts';
import { cpuMs, processTree } from './lib/proc.ts';
import type { BenchModule, BenchReport } from './types.ts';

/**
 * `npm run bench -- conversation`: how long a user waits for the avatar's answer, in real calls.
 *
 * Everything runs here as in production but the models: the local LiveKit server, the API (embedded
 * PostgreSQL), the agent worker process (`npm run agent`: its voice job with Silero VAD and the
 * embedded TTS, the avatar rendering and publishing), and a user participant that speaks recorded
 * questions (the embedded TTS, another voice) into its microphone in real time and watches the
 * avatar. The STT and LLM are the local OpenAI-compatible fake (test/fakes/openai.ts) with set delays:
 * the transcription's answer, the LLM's time to its first token, and its tokens per second.
 *
 * Per question, from the end of the user's speech (the last audible sample of their own audio, as it
 * leaves their microphone): the reply's first audible audio at the user, and its first moving mouth
 * (a frame whose mouth region leaves the range it had while the avatar idled). p50 and p95 over
 * every question of a setting, and a breakdown per stage from the timestamps the components
 * record: the voice job's `reply timings` log (the VAD's end of speech, the transcript, the end of
 * the turn, the first TTS audio sent to the avatar, the avatar's playback start) and the fake's
 * (the transcription answered, the first LLM token sent). All on this machine's one wall clock.
 *
 *   npm run bench -- conversation [--settings=before/instant,after/instant,before/models,after/models]
 *                                 [--calls=2] [--questions=5] [--stt-ms=300] [--ttft-ms=400] [--tps=0]
 *
 * A setting is `<worker>/<models>`. Worker: `before`, the voice pipeline as it was before its latency
 * work (issue 27: one VAD, 550 ms of silence, for the turn and the STT, raised to
 * 700 ms by the pause rule's wait; no preemptive TTS; sentence-sized TTS), or `after`, the defaults. Models: `instant` (no delay) or `models`
 * (--stt-ms, --ttft-ms, --tps; tokens of 4 characters, tps 0 = the whole answer at once).
 * `+AGENT_X=value` after the worker changes one of its settings (e.g. `after+AGENT_STT_SILENCE_MS=350/instant`).
 * Settings sharing a worker run on one worker process, started per worker setting.
 */

const QUESTIONS = [
  'What is a compiler?',
  'How does a parser work?',
  'Why do programs need memory?',
  'Can you explain recursion to me?',
  'What makes code run fast?',
  'Where do bugs come from?',
  'Is assembly hard to learn?',
  'What does a linker do?',
];
/** The answer, streamed: a first sentence with a clause, then more. */
const ANSWER =
  'Compilers translate the code you write into instructions, one small pass at a time. They check it first, then they make it faster.';
const TARGETS = { instantP50: 600, instantP95: 900, modelsExtra: 600 };
/** The user's microphone queue (rtc-node), ms: a sample leaves it that long after the pump hands it over. */
const MIC_QUEUE_MS = 50;
/** Audible, for the user's own audio (int16 amplitude). */
const USER_LOUD = 500;

/** The worker settings: the env of its process. */
const WORKERS: Record<string, Record<string, string>> = {
  before: {
    AGENT_STT_SILENCE_MS: '550',
    AGENT_TURN_END_MS: '550',
    AGENT_QUESTION_TURN_MS: '550',
    AGENT_FINISHED_TURN_MS: '550',
    AGENT_PREEMPTIVE_TTS: 'false',
    AGENT_TTS_CLAUSES: 'false',
    AGENT_SPEECH_START_MS: '100',
  },
  after: {},
};

interface Models {
  sttMs: number;
  ttftMs: number;
  tps: number;
}

/** CPU of the call's processes over its questions, ms per second of call. */
interface CallCpu {
  /** The worker's main process: the avatar (rendering, encoding, publishing). */
  avatar: number;
  /** The voice job process that served the call (the busiest of the worker's children). */
  voice: number;
}

interface Sample {
  call: number;
  /** The end of the user's speech, wall clock ms. */
  endWall: number;
  question: string;
  /** From the end of the user's speech, ms. */
  audioMs: number;
  mouthMs: number;
  stages: Record<string, number>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const leaving = (step: Promise<unknown>) =>
  orAfter(
    step.catch(() => {}),
    10_000,
    undefined,
  );

/** The last question, said with a pause of PAUSE_MS inside it: never an end of turn. */
const PAUSED = ['Tell me what a compiler is', 'and why it is so useful.'];
const PAUSE_MS = 450;

/** `a` and `b` joined by `pauseMs` of silence between the last audible sample of one and the first of the other. */
function withPause(a: Int16Array, b: Int16Array, sampleRate: number, pauseMs: number): Int16Array {
  let aEnd = a.length;
  while (aEnd > 0 && Math.abs(a[aEnd - 1]!) < USER_LOUD) aEnd--;
  let bStart = 0;
  while (bStart < b.length && Math.abs(b[bStart]!) < USER_LOUD) bStart++;
  const gap = Math.round((sampleRate * pauseMs) / 1000);
  const out = new Int16Array(aEnd + gap + b.length - bStart);
  out.set(a.subarray(0, aEnd), 0);
  out.set(b.subarray(bStart), aEnd + gap);
  return out;
}

/** Offset (ms) of the end of the last audible stretch of `pcm`. */
function speechEndMs(pcm: Int16Array, sampleRate: number): number {
  for (let i = pcm.length - 1; i >= 0; i--) if (Math.abs(pcm[i]!) >= USER_LOUD) return ((i + 1) * 1000) / sampleRate;
  return 0;
}

/**
 * The user's side of the call: the avatar's audio (loudness per 10 ms) and the luma of its mouth
 * region per frame, read from the I420 frame's Y plane as it arrives, with arrival times. Cheap on
 * purpose (no conversion to RGBA): on a busy machine a slow viewer reads its streams late, and
 * every figure here is an arrival time.
 */
class UserView {
  readonly room = new Room();
  readonly frames: { at: number; mouthLuma: number }[] = [];
  readonly audio: { at: number; level: number }[] = [];

  constructor(private readonly avatar: string) {}

  async connect(url: string, token: string): Promise<void> {
    this.room.on(RoomEvent.TrackSubscribed, (track, _pub, p) => {
      if (p.identity !== this.avatar) return;
      void (track.kind === TrackKind.KIND_VIDEO ? this.readVideo(track) : this.readAudio(track)).catch(() => {});
    });
    // The voice agent's session events for a client UI: not read here (rtc-node logs each one it drops).
    this.room.registerByteStreamHandler('lk.agent.session', () => {});
    this.room.registerTextStreamHandler('lk.transcription', () => {});
    await this.room.connect(url, token, { autoSubscribe: true, dynacast: false });
  }

  private async readVideo(track: RemoteTrack): Promise<void> {
    for await (const { frame } of new VideoStream(track)) {
      const at = performance.now();
      const y = frame.type === VideoBufferType.I420 ? frame.getPlane(0) : undefined;
      if (!y) continue;
      const { width, height } = frame;
      let sum = 0;
      let n = 0;
      for (let row = Math.round(height * 0.62); row < Math.round(height * 0.78); row += 2)
        for (let x = Math.round(width * 0.38); x < Math.round(width * 0.62); x += 2, n++) sum += y[row * width + x]!;
      this.frames.push({ at, mouthLuma: sum / n });
    }
  }

  private async readAudio(track: RemoteTrack): Promise<void> {
    for await (const frame of new AudioStream(track, { sampleRate: 24_000, numChannels: 1, frameSizeMs: 10 })) {
      let sum = 0;
      for (const v of frame.data) sum += Math.abs(v);
      this.audio.push({ at: performance.now(), level: sum / frame.data.length });
    }
  }

  /** When the avatar was first heard (audible) after `after`. */
  loudAfter(after: number): number | undefined {
    return this.audio.find((a) => a.at > after && a.level > 400)?.at;
  }
}

/** The first frame after `after` whose mouth region leaves the range it had over the idle `before` ms before it. */
function mouthMovedAfter(viewer: UserView, after: number, before = 2000): number | undefined {
  const idle = viewer.frames.filter((f) => f.at > after - before && f.at <= after).map((f) => f.mouthLuma);
  if (idle.length < 10) return undefined;
  const lo = Math.min(...idle);
  const hi = Math.max(...idle);
  const margin = Math.max(1.5, 0.5 * (hi - lo));
  return viewer.frames.find((f) => f.at > after && (f.mouthLuma < lo - margin || f.mouthLuma > hi + margin))?.at;
}

/** Starts metering a call's CPU: the returned function says how much its processes used since (ms/s). */
function meterCallCpu(workerPid: number): () => CallCpu {
  const cpuAt = () => new Map(processTree(workerPid).map((pid) => [pid, cpuMs([pid])]));
  const from = { at: performance.now(), byPid: cpuAt() };
  return () => {
    const seconds = (performance.now() - from.at) / 1000;
    const used = [...cpuAt()].map(([pid, ms]) => ({ pid, perS: (ms - (from.byPid.get(pid) ?? 0)) / seconds }));
    return {
      avatar: used.find((u) => u.pid === workerPid)?.perS ?? Number.NaN,
      voice: Math.max(...used.filter((u) => u.pid !== workerPid).map((u) => u.perS)),
    };
  };
}

/** The voice job's `reply timings` lines from the worker's log (wall clock, ms). */
function replyTimings(worker: WorkerProcess, msg = 'reply timings'): Record<string, number>[] {
  const out: Record<string, number>[] = [];
  for (const line of worker.logs().split('\n')) {
    if (!line.includes(`"msg":"${msg}"`)) continue;
    try {
      out.push(JSON.parse(line) as Record<string, number>);
    } catch {
      // a line cut by the log buffer's start
    }
  }
  return out;
}

const q = (xs: number[], p: number) => quantile(Float64Array.from(xs.filter(Number.isFinite)).sort(), p);
const fmt = (x: number) => (Number.isFinite(x) ? String(Math.round(x)) : 'n/a');

export const conversation: BenchModule = {
  name: 'conversation',
  description:
    "live calls with a speaking user: end of the user's speech to the reply's first audio and first moving mouth at the user, p50/p95, per stage",
  async run({ flags }): Promise<BenchReport> {
    const settings = (flags.settings ?? 'before/instant,after/instant,before/models,after/models').split(',');
    const calls = Math.max(1, Number(flags.calls ?? 2));
    const questions = Math.max(1, Math.min(QUESTIONS.length, Number(flags.questions ?? 5)));
    const modelDelays: Models = {
      sttMs: Number(flags['stt-ms'] ?? 300),
      ttftMs: Number(flags['ttft-ms'] ?? 400),
      tps: Number(flags.tps ?? 0),
    };
    /** A worker setting's env: its preset, then the `+KEY=VALUE` that follow it. */
    const workerEnv = (w: string): Record<string, string> => {
      const [preset, ...overrides] = w.split('+');
      return {
        ...WORKERS[preset!],
        ...Object.fromEntries(overrides.map((o) => [o.slice(0, o.indexOf('=')), o.slice(o.indexOf('=') + 1)])),
      };
    };
    for (const s of settings) {
      const [w, m] = s.split('/');
      if (
        !w ||
        !(w.split('+')[0]! in WORKERS) ||
        w
          .split('+')
          .slice(1)
          .some((o) => !/^AGENT_[A-Z_]+=./.test(o)) ||
        (m !== 'instant' && m !== 'models')
      )
        throw new Error(
          `--settings: ${s} is not <${Object.keys(WORKERS).join('|')}>[+AGENT_X=value...]/<instant|models>`,
        );
    }
    initializeLogger({ pretty: false, level: 'fatal' });
    quietRtcLogs();
    const failures: string[] = [];
    const dir = mkdtempSync(path.join(os.tmpdir(), 'avatar-bench-conversation-'));
    const cleanups: (() => Promise<unknown>)[] = [async () => rmSync(dir, { recursive: true, force: true })];
    const results: Record<string, unknown> = { models: modelDelays, calls, questions };
    const rows: string[] = [];
    try {
      const apiPort = await freePort();
      const [pg, livekit] = await Promise.all([
        startEmbeddedPostgres({ dir }),
        startLiveKit({ webhookUrls: [`http://127.0.0.1:${apiPort}${LIVEKIT_WEBHOOK_PATH}`] }),
      ]);
      cleanups.push(
        () => pg.stop(),
        () => livekit.stop(),
      );
      const env = {
        DATABASE_URL: pg.url,
        REDIS_URL: '',
        DATA_DIR: dir,
        NODE_ENV: 'production',
        LOG_LEVEL: 'warn',
        LIVEKIT_URL: livekit.url,
        LIVEKIT_API_KEY: LIVEKIT_DEV_KEY,
        LIVEKIT_API_SECRET: LIVEKIT_DEV_SECRET,
        AGENT_NAME: 'bench-conversation',
        RATE_LIMIT_POINTS: '1000000',
      };
      const services = await createServices(loadConfig(env), { log: createLogger('warn'), listen: true });
      cleanups.push(() => services.close());
      const server = await startApiServer(createApp(services).fetch, { port: apiPort, hostname: '127.0.0.1' });
      cleanups.push(() => server.close({ timeoutMs: 1000 }));
      const tenant = await services.tenants.create('conversation bench');
      await services.ledger.grant(tenant.id, 100_000 * MICROS_PER_SECOND);
      const { apiKey } = await services.keys.create({ tenantId: tenant.id, name: 'bench', scopes: ['*'] });
      const { avatarId } = await readyAvatar({ services }, tenant.id, {
        displayName: 'Grace',
        personality: 'You love compilers.',
        loop: { seconds: 4, size: 512 },
      });
      const spoken = await Promise.all(QUESTIONS.slice(0, questions).map((text) => speech(text)));
      const [pa, pb] = await Promise.all(PAUSED.map((text) => speech(text)));
      const paused = { pcm: withPause(pa!.pcm, pb!.pcm, pa!.sampleRate, PAUSE_MS), sampleRate: pa!.sampleRate };
      const pauseChecks = new Map<string, { asked: number; cutIn: number }>();
      await closeTts();

      // The fake's side of each turn: when the transcription and the first token were answered.
      const fake: FakeOpenAI = await startFakeOpenAI();
      cleanups.push(() => fake.close());
      const marks = { sttAt: [] as number[], firstTokenAt: [] as number[] };
      // What the user says now: the words of each stretch of it the STT is sent, in order.
      let pending = { pieces: [''], wholeSeconds: 0, heard: 0 };
      const hear = (seconds: number) =>
        seconds >= pending.wholeSeconds - 0.15
          ? pending.pieces.join(' ')
          : (pending.pieces[Math.min(pending.heard++, pending.pieces.length - 1)] ?? '');
      const useModels = (m: Models) => {
        fake.script = {
          transcribe: async (req) => {
            const text = hear(wavSeconds(req.audio));
            await sleep(m.sttMs);
            marks.sttAt.push(Date.now());
            return { text };
          },
          chat: async () => {
            await sleep(m.ttftMs);
            marks.firstTokenAt.push(Date.now());
            return m.tps > 0
              ? { text: ANSWER, chunkChars: 4, chunkDelayMs: 1000 / m.tps }
              : { text: ANSWER, chunkChars: 1000 };
          },
        };
      };

      const byWorker = new Map<string, string[]>();
      for (const s of settings) byWorker.set(s.split('/')[0]!, [...(byWorker.get(s.split('/')[0]!) ?? []), s]);
      const samples = new Map<string, Sample[]>();
      const cpuBySetting = new Map<string, CallCpu[]>();
      for (const [workerName, its] of byWorker) {
        const worker = await startWorkerProcess({
          ...env,
          OPENAI_BASE_URL: fake.baseUrl,
          OPENAI_API_KEY: 'bench',
          STT_MODEL: 'fake-stt',
          LLM_MODEL: 'fake-llm',
          LOG_LEVEL: 'info',
          NODE_ENV: 'production',
          ...workerEnv(workerName),
        });
        try {
          for (const setting of its) samples.set(setting, []);
          const oneCall = async (setting: string, c: number) => {
            const list = samples.get(setting)!;
            const res = await fetch(`http://127.0.0.1:${apiPort}/api/v1/realtime/livekit/session`, {
              method: 'POST',
              headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
              body: JSON.stringify({ avatar_id: avatarId, max_duration_seconds: 300 }),
            });
            const grant = (await res.json()) as {
              session_id: string;
              server_url: string;
              participant_token: string;
              avatar_identity: string;
            };
            if (res.status !== 200) throw new Error(`mint answered ${res.status}: ${JSON.stringify(grant)}`);
            const viewer = new UserView(grant.avatar_identity);
            await viewer.connect(grant.server_url, grant.participant_token);
            const source = new AudioSource(16_000, 1, MIC_QUEUE_MS);
            await viewer.room.localParticipant!.publishTrack(
              LocalAudioTrack.createAudioTrack('mic', source),
              new TrackPublishOptions({ source: TrackSource.SOURCE_MICROPHONE }),
            );
            const mic = new Microphone(source, 16_000);
            try {
              const ready = performance.now();
              while (
                viewer.frames.length < 50 ||
                ![...viewer.room.remoteParticipants.keys()].some((k) => k.startsWith('agent-'))
              ) {
                if (performance.now() - ready > 60_000)
                  throw new Error(`no avatar or voice agent in 60 s:\n${worker.diagnosis()}`);
                await sleep(200);
              }
              // The voice agent subscribes to the microphone and starts its session; then the call's CPU is metered.
              const cpu = await sleep(2000).then(() => meterCallCpu(worker.pid));
              for (const [i, utterance] of spoken.entries()) {
                pending = { pieces: [QUESTIONS[i]!], wholeSeconds: 0, heard: 0 };
                const before = { stt: marks.sttAt.length, token: marks.firstTokenAt.length };
                await mic.speak(utterance.pcm);
                const sent = mic.spoken.at(-1)!;
                const end = sent.start + speechEndMs(utterance.pcm, utterance.sampleRate) + MIC_QUEUE_MS;
                let heard: number | undefined;
                const waitFrom = performance.now();
                while (!(heard = viewer.loudAfter(end)) && performance.now() - waitFrom < 20_000) await sleep(20);
                if (!heard) {
                  failures.push(`${setting}: no reply heard to "${QUESTIONS[i]}"`);
                  continue;
                }
                // Let the reply play out (quiet for a second), then ask the next question.
                while (performance.now() - (viewer.audio.filter((a) => a.level > 400).at(-1)?.at ?? 0) < 1000)
                  await sleep(100);
                const mouth = mouthMovedAfter(viewer, end);
                // The end of speech (performance.now()) on the wall clock the components log in.
                const endWall = end - performance.now() + Date.now();
                const timing = replyTimings(worker).find((t) => t.turnEndAt! > endWall - 2000) ?? {};
                const rel = (at: number | undefined) => (at === undefined ? Number.NaN : at - endWall);
                list.push({
                  endWall: Math.round(endWall),
                  call: c,
                  question: QUESTIONS[i]!,
                  audioMs: heard - end,
                  mouthMs: mouth === undefined ? Number.NaN : mouth - end,
                  stages: {
                    vadEnd: rel(timing.vadEndAt),
                    sttAnswered: rel(marks.sttAt.slice(before.stt).at(-1)),
                    transcript: rel(timing.transcriptAt),
                    turnEnd: rel(timing.turnEndAt),
                    firstToken: rel(marks.firstTokenAt.slice(before.token).at(-1)),
                    ttsFirstAudio: rel(timing.ttsFirstAudioAt),
                    avatarPlayback: rel(timing.playbackAt),
                    audioAtUser: heard - end,
                    mouthAtUser: mouth === undefined ? Number.NaN : mouth - end,
                  },
                });
                await sleep(500);
              }
              cpuBySetting.set(setting, [...(cpuBySetting.get(setting) ?? []), cpu()]);
              // The utterance with a pause: no reply may start before it has all been said.
              pending = {
                pieces: PAUSED,
                wholeSeconds: speechEndMs(paused.pcm, paused.sampleRate) / 1000,
                heard: 0,
              };
              await mic.speak(paused.pcm);
              const sent = mic.spoken.at(-1)!;
              const end = sent.start + speechEndMs(paused.pcm, paused.sampleRate) + MIC_QUEUE_MS;
              await sleep(3000);
              const check = pauseChecks.get(setting) ?? { asked: 0, cutIn: 0 };
              check.asked++;
              // Cut: a turn ended inside it (its reply heard or not: the user's resuming may have stopped it).
              const wallStart = sent.start - performance.now() + Date.now();
              const wallEnd = end - performance.now() + Date.now();
              const endedInside = replyTimings(worker, 'user turn ended').some(
                (t) => t.turnEndAt! > wallStart && t.turnEndAt! < wallEnd,
              );
              if (endedInside || viewer.audio.some((a) => a.at > sent.start && a.at < end && a.level > 400))
                check.cutIn++;
              pauseChecks.set(setting, check);
              while (performance.now() - (viewer.audio.filter((a) => a.level > 400).at(-1)?.at ?? 0) < 1000)
                await sleep(100);
            } finally {
              await leaving(mic.close());
              await leaving(viewer.room.disconnect());
              await services.liveSessions.end(grant.session_id, 'manual').catch(() => {});
            }
          };
          // Call by call, the settings of this worker in turn: the machine's noise hits them alike.
          for (let c = 0; c < calls; c++) {
            for (const setting of its) {
              console.log(`  ${setting}: call ${c + 1} of ${calls}`);
              useModels(setting.endsWith('/models') ? modelDelays : { sttMs: 0, ttftMs: 0, tps: 0 });
              await oneCall(setting, c);
            }
          }
        } finally {
          await worker.stop();
        }
      }

      // The table: one row per setting, then the stages (p50, ms after the end of the user's speech).
      const stageNames = Object.keys([...samples.values()].flat()[0]?.stages ?? {});
      const width = Math.max(16, ...settings.map((x) => x.length));
      rows.push(
        `${'setting'.padEnd(width)} ${'n'.padStart(3)}  ${'audio p50'.padStart(9)} ${'p95'.padStart(5)}  ${'mouth p50'.padStart(9)} ${'p95'.padStart(5)}  ${'cut'.padStart(5)}  | stages p50: ${stageNames.join(' / ')}`,
      );
      const perSetting: Record<string, unknown> = {};
      for (const [setting, list] of samples) {
        const a = list.map((s) => s.audioMs);
        const mo = list.map((s) => s.mouthMs);
        const stages = Object.fromEntries(
          stageNames.map((n) => [
            n,
            q(
              list.map((s) => s.stages[n]!),
              0.5,
            ),
          ]),
        );
        const row = {
          n: list.length,
          audioP50Ms: q(a, 0.5),
          audioP95Ms: q(a, 0.95),
          mouthP50Ms: q(mo, 0.5),
          mouthP95Ms: q(mo, 0.95),
          stagesP50Ms: Object.fromEntries(Object.entries(stages).map(([k, v]) => [k, Math.round(v)])),
          firstQuestionAudioMs: list.filter((s) => s.question === QUESTIONS[0]).map((s) => Math.round(s.audioMs)),
          pauseCutIns: pauseChecks.get(setting) ?? { asked: 0, cutIn: 0 },
          // Each reply's stages, to see where a slow one lost its time.
          replies: list.map((s) => ({
            call: s.call,
            endWall: s.endWall,
            question: s.question,
            ...Object.fromEntries(Object.entries(s.stages).map(([k, v]) => [k, Math.round(v)])),
          })),
          cpuMsPerS: {
            avatar: Math.round(
              q(
                (cpuBySetting.get(setting) ?? []).map((c) => c.avatar),
                0.5,
              ),
            ),
            voice: Math.round(
              q(
                (cpuBySetting.get(setting) ?? []).map((c) => c.voice),
                0.5,
              ),
            ),
          },
        };
        perSetting[setting] = row;
        rows.push(
          `${setting.padEnd(width)} ${String(row.n).padStart(3)}  ${fmt(row.audioP50Ms).padStart(9)} ${fmt(row.audioP95Ms).padStart(5)}  ${fmt(row.mouthP50Ms).padStart(9)} ${fmt(row.mouthP95Ms).padStart(5)}  ${`${row.pauseCutIns.cutIn}/${row.pauseCutIns.asked}`.padStart(5)}  | ${Object.values(stages).map(fmt).join(' / ')}`,
        );
        if (list.length === 0) failures.push(`${setting}: no reply measured`);
      }
      rows.push(
        '',
        `CPU of a call while it answers (ms per second, median of calls): ${[...Object.entries(perSetting)]
          .map(([name, r]) => {
            const { avatar, voice } = (r as { cpuMsPerS: CallCpu }).cpuMsPerS;
            return `${name}: avatar ${avatar}, voice job ${voice}`;
          })
          .join('; ')}`,
      );
      results.settings = perSetting;
      rows.push(
        '',
        `ms from the end of the user's speech (its last audible sample leaving the microphone); ${calls} calls x ${questions} questions per setting; ` +
          `models: stt ${modelDelays.sttMs} ms, first token ${modelDelays.ttftMs} ms, ${modelDelays.tps || 'all'} tokens/s; ` +
          `${os.cpus().length} CPUs, load ${os.loadavg()[0]!.toFixed(1)}`,
        `cut: utterances with a ${PAUSE_MS} ms pause inside that the avatar answered before they ended (must be 0)`,
        `targets (first audio): instant p50 <= ${TARGETS.instantP50} and p95 <= ${TARGETS.instantP95}; models p50 <= stt + first token + ${TARGETS.modelsExtra} (reported, not enforced)`,
      );
    } catch (err) {
      failures.push(err instanceof Error ? (err.stack ?? err.message) : String(err));
    } finally {
      for (const c of cleanups.reverse()) await c().catch(() => {});
      await leaving(dispose());
    }
    return { results, table: rows.join('\n'), failures };
  },
};
