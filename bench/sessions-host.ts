/**
 * The worker side of `npm run bench -- sessions`, in its own process so its CPU (rendering, and
 * rtc-node's encoding on its native threads) is measured apart from the driver's senders and
 * viewer. One avatar host, as the agent worker runs it; calls are started and measured on the
 * driver's request (IPC):
 *
 *   (once loaded)                                    → { type: 'ready', videoCodec, lipsyncThreads }
 *   { type: 'start', calls: [{ sessionId, room }] } → { type: 'started' }
 *   { type: 'measure' }                              → { type: 'measured', ... } (since the last measure)
 *   { type: 'stop' }                                 → { type: 'stopped' }
 */
import { createFrameDecoderThread } from '../render/framecache/index.ts';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { loadConfig } from '../core/platform/config.ts';
import { createLogger } from '../core/platform/log.ts';
import { LocalStorage } from '../core/platform/storage/local.ts';
import { MediaSigner } from '../core/platform/storage/signing.ts';
import { createLipSyncThreads } from '../render/lipsync/index.ts';
import { PREVIOUS_SYNTH_MODEL } from '../render/synth/compare.ts';
import { createAudioVisemeThread } from '../render/visemes/index.ts';
import type { CallReporter, CallSpec } from '../agent/avatar/call.ts';
import { AvatarHost } from '../agent/avatar/host.ts';
import type { AvatarRunner } from '../agent/avatar/runner.ts';
import { loopOnlyPlayback } from '../agent/test-support.ts';
import { quietRtcLogs } from '../agent/rtc-logs.ts';

// As the worker runs (agent/worker.ts).
quietRtcLogs();

const env = process.env as Record<string, string>;
const storage = new LocalStorage(env.BENCH_STORE!, new MediaSigner('s'.repeat(32)), 'http://localhost');
// BENCH_HOST_LOG=info: the host's render stats every 10 s.
const log = createLogger(env.BENCH_HOST_LOG || 'warn');
// The worker's own settings, validated as the worker validates them.
const settings = loadConfig({
  AGENT_AUDIO_QUEUE_MS: env.AGENT_AUDIO_QUEUE_MS ?? '',
  AGENT_SPEECH_START_MS: env.AGENT_SPEECH_START_MS ?? '',
  AGENT_VIDEO_CODEC: env.AGENT_VIDEO_CODEC ?? '',
  AGENT_LIPSYNC_THREADS: env.AGENT_LIPSYNC_THREADS ?? '',
  // A neural model of the operator's, and the GPU, measured as the worker would run them.
  LIPSYNC_MODEL: env.LIPSYNC_MODEL ?? '',
  ...(env.RENDER_DEVICE ? { RENDER_DEVICE: env.RENDER_DEVICE } : {}),
});

interface CallStats {
  shown: number[];
  mouthFrames: number;
  speechAt: number[];
  firstMouthAfterSpeech: number[];
  waitingMouth: boolean;
  /** The call's audio losses at the last measure (reported as differences). */
  audioBefore: { underrunMs: number; starvedMs: number };
}
const stats = new Map<string, CallStats>();
const runners: AvatarRunner[] = [];

const reporter: CallReporter = {
  joined: async () => {},
  started: async () => {},
  heartbeat: async () => ({ ended: false }),
  observe: async () => {},
  ended: async () => {},
};

const host = new AvatarHost({
  lipsync: await createLipSyncThreads(
    settings.LIPSYNC_MODEL,
    {
      executionProvider: settings.RENDER_DEVICE,
      // --mouth=previous: the mouth graph before the articulatory one, to compare calls per worker.
      ...(env.BENCH_MOUTH === 'previous' ? { synthModelPath: PREVIOUS_SYNTH_MODEL } : {}),
    },
    settings.AGENT_LIPSYNC_THREADS,
  ),
  mouthAnalysis: await createAudioVisemeThread(),
  frameDecoder: createFrameDecoderThread(),
  vad: null,
  storage,
  livekit: { url: env.LIVEKIT_URL!, apiKey: 'devkey', apiSecret: 'secret' },
  log,
  workDir: path.join(os.tmpdir(), `bench-host-${process.pid}`),
  userJoinTimeoutMs: 3_600_000,
  audioQueueMs: settings.AGENT_AUDIO_QUEUE_MS,
  speechStartMs: settings.AGENT_SPEECH_START_MS,
  videoCodec: settings.AGENT_VIDEO_CODEC,
  observer: {
    frameShown(sessionId, _frame, mouth) {
      const s = stats.get(sessionId);
      if (!s) return;
      const now = performance.now();
      s.shown.push(now);
      if (mouth) {
        s.mouthFrames++;
        if (s.waitingMouth) {
          s.firstMouthAfterSpeech.push(now - s.speechAt.at(-1)!);
          s.waitingMouth = false;
        }
      }
    },
    speechArrived(sessionId) {
      const s = stats.get(sessionId);
      if (!s) return;
      s.speechAt.push(performance.now());
      s.waitingMouth = true;
    },
  },
});

/** Milliseconds of one JPEG encode of a 512x512 frame, in this process, now (the yardstick). */
async function jpegMs(): Promise<number> {
  const rgba = Buffer.alloc(512 * 512 * 4, 127);
  for (let i = 0; i < rgba.length; i++) rgba[i] = (i * 7919) & 255;
  const encode = () =>
    sharp(rgba, { raw: { width: 512, height: 512, channels: 4 } })
      .jpeg({ quality: 80 })
      .toBuffer();
  for (let i = 0; i < 3; i++) await encode();
  const t0 = performance.now();
  const n = 20;
  for (let i = 0; i < n; i++) await encode();
  return (performance.now() - t0) / n;
}

let lastCpu = process.cpuUsage();
let lastAt = performance.now();

const percentile = (a: number[], p: number) => {
  if (a.length === 0) return Number.NaN;
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(s.length * p))]!;
};

// Orphaned (the bench died), it must not keep publishing calls.
process.on('disconnect', () => process.exit(1));

process.on('message', (m: { type: string; calls?: { sessionId: string; room: string }[] }) => {
  void (async () => {
    if (m.type === 'start') {
      for (const c of m.calls!) {
        stats.set(c.sessionId, {
          shown: [],
          mouthFrames: 0,
          speechAt: [],
          firstMouthAfterSpeech: [],
          waitingMouth: false,
          audioBefore: { underrunMs: 0, starvedMs: 0 },
        });
        const spec: CallSpec = {
          sessionId: c.sessionId,
          tenantId: 'bench',
          mode: 'provider',
          roomName: c.room,
          avatarIdentity: `avatar-${c.sessionId}`,
          avatarName: 'Bench',
          agentIdentity: `agent-${c.sessionId}`,
          userIdentity: null,
          maxDurationSeconds: 3600,
          record: false,
          body: {
            kind: 'avatar',
            playback: loopOnlyPlayback(env.BENCH_LOOP_KEY!, {
              avatarId: 'ava_bench',
              tenantId: 'bench',
              displayName: 'Bench',
            }),
          },
          ownsRoom: false,
        };
        runners.push(await host.startCall(spec, reporter, null));
      }
      process.send!({ type: 'started' });
    } else if (m.type === 'measure') {
      const now = performance.now();
      const cpu = process.cpuUsage(lastCpu);
      const seconds = (now - lastAt) / 1000;
      const perCall = [...stats.entries()].map(([sessionId, s]) => {
        const shown = s.shown.filter((t) => t >= lastAt);
        const gaps = shown.slice(1).map((t, i) => t - shown[i]!);
        const audio = runners.find((r) => r.spec.sessionId === sessionId)?.audioHealth ?? {
          underrunMs: 0,
          starvedMs: 0,
        };
        const lost = {
          underrunMs: audio.underrunMs - s.audioBefore.underrunMs,
          starvedMs: audio.starvedMs - s.audioBefore.starvedMs,
        };
        s.audioBefore = { underrunMs: audio.underrunMs, starvedMs: audio.starvedMs };
        return {
          sessionId,
          fps: shown.length / seconds,
          p95IntervalMs: percentile(gaps, 0.95),
          mouthFrames: s.mouthFrames,
          ...lost,
        };
      });
      const latencies = [...stats.values()].flatMap((s) => s.firstMouthAfterSpeech);
      const jpeg = await jpegMs();
      for (const s of stats.values()) {
        s.shown = [];
        s.firstMouthAfterSpeech = [];
      }
      process.send!({
        type: 'measured',
        seconds,
        cpuMsPerSecond: (cpu.user + cpu.system) / 1000 / seconds,
        perCall,
        speechToMouthMs: { p50: percentile(latencies, 0.5), p95: percentile(latencies, 0.95), n: latencies.length },
        jpegMs: jpeg,
        batchMsPerFrame: host.renderer.stats.frames ? host.renderer.stats.batchMs / host.renderer.stats.frames : 0,
      });
      lastCpu = process.cpuUsage();
      lastAt = performance.now();
    } else if (m.type === 'stop') {
      await Promise.all(runners.splice(0).map((r) => r.end('released')));
      stats.clear();
      process.send!({ type: 'stopped' });
    } else if (m.type === 'exit') {
      await host.close();
      process.exit(0);
    }
  })().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
});
process.send!({
  type: 'ready',
  videoCodec: settings.AGENT_VIDEO_CODEC,
  lipsyncThreads: settings.AGENT_LIPSYNC_THREADS,
});
