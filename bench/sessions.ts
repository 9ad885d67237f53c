import { fork, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { initializeLogger, voice } from '@livekit/agents';
import { AudioFrame, Room, TrackKind, dispose } from '@livekit/rtc-node';
import { RoomServiceClient } from 'livekit-server-sdk';
import { LocalStorage } from '../core/platform/storage/local.ts';
import { MediaSigner } from '../core/platform/storage/signing.ts';
import { orAfter } from '../core/platform/time.ts';
import { closeTts, synthesize } from '../render/tts/index.ts';
import { quietRtcLogs } from '../agent/rtc-logs.ts';
import { Viewer, token } from '../agent/test-support.ts';
import { storeTestCache } from '../test/realtime.ts';
import { startLiveKit } from '../test/deps.ts';
import type { BenchModule, BenchReport } from './types.ts';

/**
 * `npm run bench -- sessions`: how many live calls one worker process carries on this machine.
 *
 * The worker side (bench/sessions-host.ts) runs in its own process: one avatar host, real rtc-node
 * publishing to the local LiveKit server, rtc-node's encode included; its CPU is measured alone.
 * This process drives it: per call an agent participant speaks to the avatar over LiveKit's avatar
 * protocol half the time (2.5 s of speech, 2.5 s of silence), and one viewer decodes one call's video
 * to measure what is delivered. The largest N at which every call keeps 24 fps and a p95 frame
 * interval of at most 50 ms (published, and delivered to the viewer) is the result; N grows past it,
 * to show how calls degrade, until one falls under 20 fps. CPU per call is set beside one JPEG encode
 * of a 512x512 frame, timed in the worker process in the same run. `viewerFullSizePercent` is the
 * share of the viewed call's frames that arrived at 512x512: the encoder scales a video down, without
 * a word, when it falls behind or its bandwidth estimate drops.
 *
 *   npm run bench -- sessions [--steps=1,2,4,6,8,10,12] [--seconds=12] [--warmup=4] [--sender=realtime|burst]
 *                             [--audio-queue-ms=100] [--speech-start-ms=100]   (AGENT_AUDIO_QUEUE_MS, AGENT_SPEECH_START_MS)
 *                             [--video-codec=h264|vp8]                        (AGENT_VIDEO_CODEC)
 *                             [--lipsync-threads=2]                           (AGENT_LIPSYNC_THREADS)
 *                             [--mouth=previous]                              (the mouth graph before the articulatory one)
 *                             [--stand-ins-nice=0]
 *
 * In production the LiveKit server and the callers run on other machines. `--stand-ins-nice=N` runs
 * this process and the LiveKit server at nice N (the worker stays at 0), so the worker's threads
 * come first when the cores are contended, as they would on a machine of their own: the question
 * "how many calls does a 2-core worker carry, all-in" then reads less of the stand-ins' share of the
 * same cores. The default, 0, has everything compete as equals.
 */

const HOST = fileURLToPath(new URL('./sessions-host.ts', import.meta.url));
const pidusage = createRequire(import.meta.url)('pidusage') as (pid: number) => Promise<{ ctime: number }>;

/**
 * CPU time so far of what shares the machine with the worker: this process (the calls' agents and
 * the viewer), the LiveKit server, and every core together (busy and idle), in ms.
 */
async function machineCpu(livekitPid: number | undefined) {
  const self = process.cpuUsage();
  const livekit = livekitPid ? ((await pidusage(livekitPid).catch(() => null))?.ctime ?? Number.NaN) : Number.NaN;
  let busy = 0;
  let idle = 0;
  for (const { times } of os.cpus()) {
    busy += times.user + times.nice + times.sys + times.irq;
    idle += times.idle;
  }
  return { driver: (self.user + self.system) / 1000, livekit, busy, idle };
}

/** Sets the nice value of every thread of `pid` (Linux applies it per thread; threads they start inherit it). */
function renice(pid: number, nice: number): void {
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      os.setPriority(Number(tid), nice);
    } catch {
      // a thread that ended meanwhile
    }
  }
}

/** Waits for a cleanup step at most 10 s, whatever its outcome. */
const leaving = (step: Promise<unknown>) =>
  orAfter(
    step.catch(() => {}),
    10_000,
    undefined,
  );

/** A figure for the table (NaN, and what IPC turns NaN into, as n/a). */
const fixed = (v: number | null | undefined, digits: number) =>
  typeof v === 'number' && Number.isFinite(v) ? +v.toFixed(digits) : 'n/a';

interface Measured {
  seconds: number;
  cpuMsPerSecond: number;
  perCall: {
    sessionId: string;
    fps: number;
    p95IntervalMs: number;
    mouthFrames: number;
    underrunMs: number;
    starvedMs: number;
  }[];
  speechToMouthMs: { p50: number; p95: number; n: number };
  jpegMs: number;
  batchMsPerFrame: number;
}

function request<T>(child: ChildProcess, msg: object, reply: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: { type: string }) => {
      if (m.type !== reply) return;
      child.off('message', onMessage);
      resolve(m as T);
    };
    child.on('message', onMessage);
    child.once('exit', (code) => reject(new Error(`bench host exited with ${code}`)));
    child.send(msg);
  });
}

/**
 * An agent participant that speaks `pcm` to the avatar, then waits, in a loop, until stopped.
 * `realtime`: streamed at the pace it plays (a TTS that streams as it speaks, the harder case for
 * the avatar); `burst`: sent as fast as it goes (most TTS synthesize faster than real time).
 */
function speaker(
  room: Room,
  avatarIdentity: string,
  pcm: Int16Array,
  sampleRate: number,
  silenceMs: number,
  pace: 'realtime' | 'burst',
) {
  voice.DataStreamAudioOutput._playbackFinishedRpcRegistered = false;
  const out = new voice.DataStreamAudioOutput({
    room,
    destinationIdentity: avatarIdentity,
    waitRemoteTrack: TrackKind.KIND_VIDEO,
  });
  let running = true;
  const done = (async () => {
    const step = sampleRate / 50;
    while (running) {
      const from = performance.now();
      for (let i = 0; i < pcm.length && running; i += step) {
        const part = pcm.slice(i, Math.min(pcm.length, i + step));
        await out.captureFrame(new AudioFrame(part, sampleRate, 1, part.length));
        if (pace === 'burst') continue;
        // On its own clock, not the avatar's.
        const due = from + ((i + step) * 1000) / sampleRate;
        await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())));
      }
      out.flush();
      // Half the time speaking: a burst sender waits for the speech to play out, then as long again.
      const spoken = (pcm.length * 1000) / sampleRate;
      await new Promise((r) =>
        setTimeout(r, silenceMs + (pace === 'burst' ? Math.max(0, spoken - (performance.now() - from)) : 0)),
      );
    }
  })();
  return {
    stop: async () => {
      running = false;
      await done.catch(() => {});
    },
  };
}

export const sessions: BenchModule = {
  name: 'sessions',
  description:
    'live calls per worker process: largest N at >= 24 fps and p95 frame interval <= 50 ms, CPU per call beside a JPEG encode',
  async run({ flags }): Promise<BenchReport> {
    const steps = (flags.steps ?? '1,2,4,6,8,10,12').split(',').map(Number);
    const seconds = Number(flags.seconds ?? 12);
    const warmup = Number(flags.warmup ?? 4);
    const pace = flags.sender ?? 'realtime';
    if (pace !== 'realtime' && pace !== 'burst') throw new Error(`--sender must be realtime or burst, not ${pace}`);
    initializeLogger({ pretty: false, level: 'fatal' });
    // agents-js's sender leaves a stream pending when its room disconnects (rtc-node aborts it), and one
    // cut off mid-write while a step's callers leave fails with "unable to send packet": not benchmark failures.
    let callersLeaving = false;
    const ignoreAbort = (err: unknown) => {
      if (!callersLeaving && !(err instanceof Error && err.name === 'AbortError')) throw err;
    };
    process.on('unhandledRejection', ignoreAbort);
    // The calls' agents and viewer stand in for remote machines: this process's WebRTC engine runs as the worker's does.
    quietRtcLogs();
    const livekit = await startLiveKit();
    const rooms = new RoomServiceClient(livekit.url.replace(/^ws/, 'http'), 'devkey', 'secret');
    const store = mkdtempSync(path.join(os.tmpdir(), 'bench-sessions-'));
    const storage = new LocalStorage(store, new MediaSigner('s'.repeat(32)), 'http://localhost');
    const FRAME_SIZE = 512;
    const loopKey = await storeTestCache(storage, 'bench/loop/cache', { seconds: 8, size: FRAME_SIZE });
    const speech = await synthesize({
      text: 'The quick brown fox jumps over the lazy dog, and then it runs far away.',
    });
    await closeTts();
    const host = fork(HOST, [], {
      execArgv: [
        '--import',
        'tsx',
        ...(process.env.BENCH_HOST_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_HOST_PROF] : []),
      ],
      env: {
        ...process.env,
        NODE_OPTIONS: '',
        LIVEKIT_URL: livekit.url,
        BENCH_STORE: store,
        BENCH_LOOP_KEY: loopKey,
        NODE_ENV: 'production',
        AGENT_AUDIO_QUEUE_MS: flags['audio-queue-ms'] ?? process.env.AGENT_AUDIO_QUEUE_MS ?? '',
        AGENT_SPEECH_START_MS: flags['speech-start-ms'] ?? process.env.AGENT_SPEECH_START_MS ?? '',
        AGENT_VIDEO_CODEC: flags['video-codec'] ?? process.env.AGENT_VIDEO_CODEC ?? '',
        AGENT_LIPSYNC_THREADS: flags['lipsync-threads'] ?? process.env.AGENT_LIPSYNC_THREADS ?? '',
        BENCH_MOUTH: flags.mouth ?? '',
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    // The codec and lip-sync threads the host runs with, as its configuration resolved them.
    const { videoCodec: codec, lipsyncThreads } = await new Promise<{ videoCodec: string; lipsyncThreads: number }>(
      (resolve, reject) => {
        host.once('message', resolve);
        host.once('exit', (code) =>
          reject(new Error(`the bench's worker process exited (${code}) before it was ready: see its error above`)),
        );
      },
    );

    // The worker was forked at this process's priority; the stand-ins for other machines go below it.
    const standInsNice = Number(flags['stand-ins-nice'] ?? 0);
    if (!Number.isInteger(standInsNice) || standInsNice < 0 || standInsNice > 19)
      throw new Error(`--stand-ins-nice must be an integer from 0 to 19, not ${flags['stand-ins-nice']}`);
    if (standInsNice !== 0) {
      renice(process.pid, standInsNice);
      if (livekit.pid) renice(livekit.pid, standInsNice);
    }

    const rows: Record<string, unknown>[] = [];
    let best = 0;
    let failures: string[] = [];
    try {
      for (const n of steps) {
        const calls = Array.from({ length: n }, (_, i) => ({
          sessionId: `ses_bench${n}x${i}`,
          room: `bench-${n}-${i}-${Date.now()}`,
        }));
        for (const c of calls) await rooms.createRoom({ name: c.room, emptyTimeout: 60 });
        await request(host, { type: 'start', calls }, 'started');
        const senders: { room: Room; stop: () => Promise<void> }[] = [];
        for (const [i, c] of calls.entries()) {
          const room = new Room();
          await room.connect(livekit.url, await token(c.room, `agent-${c.sessionId}`, { agent: true }), {
            autoSubscribe: false,
            dynacast: false,
          });
          // Staggered, so the calls do not all speak at once.
          await new Promise((r) => setTimeout(r, (2500 / n) * (i > 0 ? 1 : 0)));
          senders.push({
            room,
            ...speaker(room, `avatar-${c.sessionId}`, speech.samples, speech.sampleRate, 2500, pace),
          });
        }
        // Timing only: the bench's viewer shares the worker's cores, so it looks at no pixel.
        const viewer = new Viewer(`avatar-${calls[0]!.sessionId}`, { timingOnly: true });
        await viewer.join(livekit.url, calls[0]!.room, 'bench-viewer');
        await new Promise((r) => setTimeout(r, warmup * 1000));
        callersLeaving = false;
        await request<Measured>(host, { type: 'measure' }, 'measured');
        const from = performance.now();
        const cpuFrom = await machineCpu(livekit.pid);
        await new Promise((r) => setTimeout(r, seconds * 1000));
        const m = await request<Measured>(host, { type: 'measure' }, 'measured');
        const cpuTo = await machineCpu(livekit.pid);
        const windowS = (performance.now() - from) / 1000;
        const received = viewer.frames.filter((f) => f.at >= from);
        const seen = received.map((f) => f.at);
        // libwebrtc scales a video down when its encoder falls behind or its bandwidth estimate drops.
        const fullSize = received.filter((f) => f.width === FRAME_SIZE && f.height === FRAME_SIZE).length;
        const gaps = seen
          .slice(1)
          .map((t, i) => t - seen[i]!)
          .sort((a, b) => a - b);
        const viewerFps = seen.length / windowS;
        const viewerP95 = gaps[Math.floor(gaps.length * 0.95)] ?? Number.NaN;
        const minFps = Math.min(...m.perCall.map((c) => c.fps));
        const worstP95 = Math.max(...m.perCall.map((c) => c.p95IntervalMs));
        const ok = minFps >= 24 && worstP95 <= 50 && viewerFps >= 24 && viewerP95 <= 50;
        const cpuPerCall = m.cpuMsPerSecond / n;
        rows.push({
          calls: n,
          minPublishedFps: fixed(minFps, 1),
          worstPublishedP95Ms: fixed(worstP95, 1),
          viewerFps: fixed(viewerFps, 1),
          viewerP95Ms: fixed(viewerP95, 1),
          viewerFullSizePercent: fixed((100 * fullSize) / received.length, 0),
          cpuMsPerSecondPerCall: fixed(cpuPerCall, 1),
          // The rest of the machine over the same window: the calls' agents and the viewer (this
          // process), the LiveKit server, and how busy both cores were.
          driverMsPerSecond: fixed((cpuTo.driver - cpuFrom.driver) / windowS, 0),
          livekitMsPerSecond: fixed((cpuTo.livekit - cpuFrom.livekit) / windowS, 0),
          machineBusyPercent: fixed(
            (100 * (cpuTo.busy - cpuFrom.busy)) / (cpuTo.busy - cpuFrom.busy + cpuTo.idle - cpuFrom.idle),
            0,
          ),
          jpegEncodeMs: fixed(m.jpegMs, 2),
          cpuPerCallInJpegEncodesPerFrame: fixed(cpuPerCall / 25 / m.jpegMs, 2),
          batchMsPerFrame: fixed(m.batchMsPerFrame, 2),
          speechToFirstMouthMsP50: fixed(m.speechToMouthMs.p50, 0),
          mouthFramesPerCall: Math.round(m.perCall.reduce((a, c) => a + c.mouthFrames, 0) / n),
          // Audio lost, worst call, per minute: its queue running dry (a stalled process), and speech that came late.
          worstUnderrunMsPerMin: fixed(Math.max(...m.perCall.map((c) => c.underrunMs)) * (60 / m.seconds), 0),
          worstStarvedMsPerMin: fixed(Math.max(...m.perCall.map((c) => c.starvedMs)) * (60 / m.seconds), 0),
          ok,
        });
        // Progress, for runs of many steps (a large host takes minutes): the table comes at the end.
        console.error(
          `sessions: ${n} calls: ${fixed(minFps, 1)} fps at least, p95 interval ${fixed(worstP95, 0)} ms at worst, the viewer ${fixed(viewerFps, 1)} fps${ok ? '' : ', under the bar'}`,
        );
        // Cleanup, bounded: an rtc-node disconnect can hang (seen once here), which must not lose the figures.
        callersLeaving = true;
        await leaving(viewer.leave());
        await Promise.all(senders.map((s) => leaving(s.stop())));
        await Promise.all(senders.map((s) => leaving(s.room.disconnect())));
        await request(host, { type: 'stop' }, 'stopped');
        for (const c of calls) await rooms.deleteRoom(c.room).catch(() => {});
        if (ok) best = n;
        // Past the bar, the next steps still show how it degrades, until calls fall far under it.
        else if (minFps < 20) break;
      }
    } catch (err) {
      failures = [String(err)];
    } finally {
      host.send({ type: 'exit' });
      await new Promise((r) => host.once('exit', r));
      await livekit.stop();
      await leaving(dispose());
      process.off('unhandledRejection', ignoreAbort);
    }
    // What the worker alone would carry: every core given to it (LiveKit and the callers elsewhere, as
    // in production), at the CPU per call it used at the largest N at the bar. Derived, not measured.
    const atBar = rows.find((r) => r.calls === best);
    const cores = os.cpus().length;
    const workerOnly =
      atBar && typeof atBar.cpuMsPerSecondPerCall === 'number'
        ? Math.floor((cores * 1000) / atBar.cpuMsPerSecondPerCall)
        : null;
    const header = Object.keys(rows[0] ?? { calls: 0 });
    const table = [header.join('\t'), ...rows.map((r) => header.map((h) => String(r[h])).join('\t'))].join('\n');
    return {
      results: {
        largestN: best,
        workerOnlyCallsDerived: workerOnly,
        rows,
        sender: pace,
        videoCodec: codec,
        lipsyncThreads,
        mouth: flags.mouth === 'previous' ? 'previous' : 'current',
        standInsNice,
        loadAverageAtEnd: os.loadavg()[0],
      },
      table:
        `${table}\n\nlargest N at >= 24 fps and p95 <= 50 ms: ${best} (${pace} sender, ${codec}, ${lipsyncThreads} lip-sync threads${flags.mouth === 'previous' ? ', the previous mouth graph' : ''}; machine: ${cores} cores, load ${os.loadavg()[0]!.toFixed(1)}; ` +
        `the LiveKit server and the calls' agents and viewer share its cores${standInsNice ? `, at nice ${standInsNice}` : ''})` +
        (workerOnly === null
          ? ''
          : `\nderived: ${cores} cores given to the worker alone carry ${workerOnly} calls at the ${atBar!.cpuMsPerSecondPerCall} ms/s per call it used at ${best}`),
      failures,
    };
  },
};
