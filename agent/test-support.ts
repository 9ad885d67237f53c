/**
 * What the agent's tests share: a LiveKit participant that watches the avatar like a user (frames, audio, the sync marker), and tokens.
 */
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import {
  AudioFrame,
  AudioStream,
  Room,
  RoomEvent,
  TrackKind,
  VideoBufferType,
  VideoStream,
  type AudioSource,
  type RemoteTrack,
} from '@livekit/rtc-node';
import { AccessToken } from 'livekit-server-sdk';
import { availabilityFrom } from '../clips/behavior/index.ts';
import type { AvatarPlayback } from '../core/avatars/playback.ts';
import { orAfter } from '../core/platform/time.ts';
import { synthesize } from '../render/tts/index.ts';
import { LIVEKIT_DEV_KEY as DEV_KEY, LIVEKIT_DEV_SECRET as DEV_SECRET, livekitLogFor } from '../test/deps.ts';
import { resubscribeStalledTracks } from './stalled-tracks.ts';

export { DEV_KEY, DEV_SECRET };

/** A ready avatar that plays its idle loop (`loopKey`, a stored frame cache) and nothing else: no clips, no voice or LLM of its own. */
export function loopOnlyPlayback(
  loopKey: string,
  who: { avatarId: string; tenantId: string; displayName: string },
): AvatarPlayback {
  return {
    ...who,
    status: 'ready',
    loopCacheKey: loopKey,
    cacheVersion: 1,
    clips: new Map(),
    behavior: {},
    availability: availabilityFrom({}, true),
    instructions: '',
    live: { greeting: null, language: 'en' },
    defaultVoiceId: null,
    voice: null,
    llm: null,
  };
}

export async function token(
  room: string,
  identity: string,
  opts: { agent?: boolean; attributes?: Record<string, string> } = {},
): Promise<string> {
  const at = new AccessToken(DEV_KEY, DEV_SECRET, {
    identity,
    ...(opts.attributes ? { attributes: opts.attributes } : {}),
  });
  if (opts.agent) at.kind = 'agent';
  at.addGrant({ room, roomJoin: true, canPublish: true, canSubscribe: true, canPublishData: true });
  return at.toJwt();
}

export interface SeenFrame {
  /** Arrival time at the viewer, ms (performance.now()). */
  at: number;
  width: number;
  height: number;
  /** The sync marker (top-left square) is white. */
  marker: boolean;
  /** Mean luma of the mouth region (a box around the frame's lower middle). */
  mouthLuma: number;
  /** 8x8 luma thumbnail, to tell whether the picture moves. */
  thumb: Uint8Array;
}

/** Mean absolute difference of two thumbnails (0..255). */
export function thumbDistance(a: Uint8Array, b: Uint8Array): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d += Math.abs(a[i]! - b[i]!);
  return d / a.length;
}

export interface HeardChunk {
  at: number;
  /** Mean absolute amplitude. */
  level: number;
  samples: number;
}

/** A participant watching the avatar as a user would: every frame and audio chunk it receives, with arrival times. */
export class Viewer {
  readonly room = new Room();
  readonly frames: SeenFrame[] = [];
  readonly audio: HeardChunk[] = [];
  /** The transcripts agents publish to the room (`lk.transcription`), one per stream, as each closes. */
  readonly transcripts: { identity: string; text: string; at: number }[] = [];
  /** The codec of the watched participant's video, as the room announced it (e.g. `video/H264`). */
  videoMimeType: string | undefined;
  private readonly loops: Promise<void>[] = [];

  /**
   * `timingOnly`: frames are counted and timed but not looked at (no marker, mouth or thumbnail):
   * what a benchmark needs, without the conversion to RGBA and the pixel sums that cost the viewer's
   * machine several milliseconds a frame.
   */
  constructor(
    private readonly watch: string,
    private readonly opts: { timingOnly?: boolean } = {},
  ) {}

  /** Joins `roomName` as `identity` with a dev-key token of its own. */
  async join(url: string, roomName: string, identity: string): Promise<void> {
    await this.connect(url, await token(roomName, identity));
  }

  /** Joins with a token (a mint's participant_token). */
  async connect(url: string, participantToken: string): Promise<void> {
    this.room.on(RoomEvent.TrackSubscribed, (track, pub, p) => {
      if (p.identity !== this.watch) return;
      if (track.kind === TrackKind.KIND_VIDEO) this.videoMimeType = pub.mimeType;
      this.loops.push(track.kind === TrackKind.KIND_VIDEO ? this.readVideo(track) : this.readAudio(track));
    });
    this.room.registerTextStreamHandler('lk.transcription', (reader, { identity }) => {
      reader.readAll().then(
        (text) => this.transcripts.push({ identity, text, at: performance.now() }),
        () => {},
      );
    });
    await this.room.connect(url, participantToken, { autoSubscribe: true, dynacast: false });
    resubscribeStalledTracks(this.room, { wanted: (_pub, p) => p.identity === this.watch });
  }

  private async readVideo(track: RemoteTrack): Promise<void> {
    for await (const ev of new VideoStream(track)) {
      if (this.opts.timingOnly) {
        this.frames.push({
          at: performance.now(),
          width: ev.frame.width,
          height: ev.frame.height,
          marker: false,
          mouthLuma: Number.NaN,
          thumb: new Uint8Array(0),
        });
        continue;
      }
      const rgba = ev.frame.convert(VideoBufferType.RGBA);
      const { width, height, data } = rgba;
      const px = (x: number, y: number) => {
        const i = (y * width + x) * 4;
        return 0.299 * data[i]! + 0.587 * data[i + 1]! + 0.114 * data[i + 2]!;
      };
      let mouth = 0;
      let n = 0;
      for (let y = Math.round(height * 0.62); y < Math.round(height * 0.78); y += 2) {
        for (let x = Math.round(width * 0.38); x < Math.round(width * 0.62); x += 2) {
          mouth += px(x, y);
          n++;
        }
      }
      const thumb = new Uint8Array(64);
      for (let ty = 0; ty < 8; ty++)
        for (let tx = 0; tx < 8; tx++)
          thumb[ty * 8 + tx] = px(Math.floor(((tx + 0.5) * width) / 8), Math.floor(((ty + 0.5) * height) / 8));
      this.frames.push({ at: performance.now(), width, height, marker: px(12, 12) > 128, mouthLuma: mouth / n, thumb });
    }
  }

  private async readAudio(track: RemoteTrack): Promise<void> {
    for await (const frame of new AudioStream(track, { sampleRate: 24_000, numChannels: 1, frameSizeMs: 10 })) {
      let sum = 0;
      for (const v of frame.data) sum += Math.abs(v);
      this.audio.push({ at: performance.now(), level: sum / frame.data.length, samples: frame.data.length });
    }
  }

  /** Frames per second received over the last `ms`. */
  fps(sinceMs: number, untilMs = performance.now()): number {
    const n = this.frames.filter((f) => f.at >= sinceMs && f.at < untilMs).length;
    return (n * 1000) / (untilMs - sinceMs);
  }

  /** Leaves the room; fails (rather than hanging the test) if rtc-node's disconnect does not complete in 10 s. */
  async leave(): Promise<void> {
    await within(this.room.disconnect(), 10_000, `viewer of ${this.watch} leaving its room`);
  }
}

/**
 * `p`, or an error naming `what` once `ms` have passed: for the test's own rtc-node clients, whose
 * calls have no time limit of their own, so a step that hangs fails with its name instead of at the
 * test's timeout with none.
 */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  const late = Symbol('late');
  const value = await orAfter(p, ms, late);
  if (value === late) throw new Error(`${what}: not done after ${ms / 1000} s`);
  return value;
}

/** When the viewer first heard the avatar speak (audible audio) after `after` (ms, performance.now()), if it has. */
export const avatarLoudAfter = (viewer: Viewer, after: number): number | undefined =>
  viewer.audio.find((a) => a.at > after && a.level > 400)?.at;

/** A user's utterance: `text` spoken by the embedded TTS. */
export async function speech(text: string): Promise<{ pcm: Int16Array; sampleRate: number; seconds: number }> {
  const s = await synthesize({ text, voice: 'rms' });
  return { pcm: s.samples, sampleRate: s.sampleRate, seconds: s.durationSeconds };
}

/** Loudness (RMS) of `pcm` in consecutive steps of `ms`. */
export function loudnessContour(pcm: Int16Array, sampleRate: number, ms = 20): number[] {
  const step = Math.round((sampleRate * ms) / 1000);
  const out: number[] = [];
  for (let i = 0; i + step <= pcm.length; i += step) {
    let sum = 0;
    for (let k = i; k < i + step; k++) sum += pcm[k]! * pcm[k]!;
    out.push(Math.sqrt(sum / step));
  }
  return out;
}

/** How closely `needle`'s contour appears anywhere in `haystack`: the best correlation (-1..1) over every offset. */
export function contourMatch(needle: number[], haystack: number[]): number {
  const n = needle.length;
  const mn = needle.reduce((x, y) => x + y, 0) / n;
  const dn = needle.map((v) => v - mn);
  const sn = Math.sqrt(dn.reduce((x, v) => x + v * v, 0));
  let best = -1;
  for (let o = 0; o + n <= haystack.length; o++) {
    // Pearson correlation of the needle with this window (the needle's mean already removed).
    let sum = 0;
    let sumSq = 0;
    let dot = 0;
    for (let k = 0; k < n; k++) {
      const w = haystack[o + k]!;
      sum += w;
      sumSq += w * w;
      dot += dn[k]! * w;
    }
    const sw = Math.sqrt(sumSq - (sum * sum) / n);
    if (sw > 0 && sn > 0) best = Math.max(best, dot / (sn * sw));
  }
  return best;
}

/** Onsets (rising edges) in a timed boolean signal: times where it turns true after `minOff` ms of false. */
export function onsets(points: { at: number; on: boolean }[], minOffMs = 150): number[] {
  const out: number[] = [];
  let lastOn = -Infinity;
  for (const p of points) {
    if (p.on) {
      if (p.at - lastOn > minOffMs) out.push(p.at);
      lastOn = p.at;
    }
  }
  return out;
}

/** The agent worker as a user runs it (`node --import tsx agent/main.ts`), with its logs kept for failures. */
export interface WorkerProcess {
  logs: () => string;
  /**
   * For a failure message: its last warnings and errors (pino levels 40 and up, and the WebRTC
   * engine's), kept apart from the debug lines that push them out of `logs`; the tail of its log
   * without the render stats; and (LIVEKIT_LOG set) what the LiveKit server logged about the rooms
   * of the last warnings.
   */
  diagnosis: (tailChars?: number) => string;
  /** Sends SIGTERM and waits for the exit; resolves with the exit code. */
  stop: (signal?: NodeJS.Signals) => Promise<number | null>;
  exited: Promise<number | null>;
  pid: number;
}

/** WORKER_CPU_PROFILE_DIR: a CPU profile of the worker and of each of its job processes (they inherit its flags), written as each exits. */
const cpuProfileArgs = () =>
  process.env.WORKER_CPU_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.WORKER_CPU_PROFILE_DIR}`] : [];

export async function startWorkerProcess(env: Record<string, string>, readyTimeoutMs = 90_000): Promise<WorkerProcess> {
  const { spawn } = await import('node:child_process');
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
  const child = spawn(process.execPath, [...cpuProfileArgs(), '--import', 'tsx', 'agent/main.ts'], {
    cwd: root,
    env: { ...process.env, NODE_OPTIONS: '', NODE_ENV: 'test', ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let logs = '';
  let partial = '';
  const problems: string[] = [];
  const keep = (b: Buffer) => {
    const text = b.toString();
    logs = (logs + text).slice(-200_000);
    const lines = (partial + text).split('\n');
    partial = lines.pop()!;
    // pino's warnings and errors, and the WebRTC engine's (its own logger, on stderr: agent/rtc-logs.ts).
    for (const line of lines)
      if (/"level":(4|5|6)0\b|^\[\S+ (WARN|ERROR) /.test(line)) problems.push(line.slice(0, 2000));
    problems.splice(0, Math.max(0, problems.length - 30));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  if (process.env.WORKER_LOG_DIR) {
    const file = createWriteStream(path.join(process.env.WORKER_LOG_DIR, `worker-${child.pid}.log`), { flags: 'a' });
    child.stdout!.on('data', (b: Buffer) => file.write(b));
    child.stderr!.on('data', (b: Buffer) => file.write(b));
    child.on('exit', () => file.end());
  }
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`agent worker not ready in ${readyTimeoutMs} ms:\n${logs.slice(-4000)}`)),
      readyTimeoutMs,
    );
    child.on('message', (m) => {
      if (m === 'ready') {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`agent worker exited with ${code}:\n${logs.slice(-4000)}`));
    });
  });
  return {
    pid: child.pid!,
    logs: () => logs,
    diagnosis: (tailChars = 3000) => {
      // The periodic render stats would fill the tail and push out what the call did.
      const tail = logs
        .split('\n')
        .filter((l) => !l.includes('"msg":"render stats"'))
        .join('\n')
        .slice(-tailChars);
      // The rooms of the last warnings, as the LiveKit server saw them (LIVEKIT_LOG: CI sets it).
      const rooms = [
        ...new Set(problems.map((l) => /"room":"([^"]+)"/.exec(l)?.[1]).filter((r): r is string => !!r)),
      ].slice(-2);
      const server = rooms.map((r) => `livekit log of ${r}:\n${livekitLogFor(r)}`).filter((t) => !t.endsWith(':\n'));
      return [
        `worker warnings:\n${problems.join('\n')}`,
        `worker log (render stats left out):\n${tail}`,
        ...server,
      ].join('\n');
    },
    exited,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** A user's microphone: silence at real-time pace, and speech when asked (VAD needs the silence around it). */
export class Microphone {
  private readonly pending: { pcm: Int16Array; offset: number; resolve: () => void }[] = [];
  private running = true;
  private readonly done: Promise<void>;
  /** When each utterance started and finished being sent, ms (performance.now()). */
  readonly spoken: { start: number; end: number }[] = [];

  constructor(
    private readonly source: AudioSource,
    private readonly sampleRate: number,
  ) {
    this.done = this.pump();
  }

  /** Queues `pcm` (at the microphone's rate); resolves once it has all been sent (fails if that takes 10 s longer than real time). */
  speak(pcm: Int16Array): Promise<void> {
    const sent = new Promise<void>((resolve) => this.pending.push({ pcm, offset: 0, resolve }));
    const queued = this.pending.reduce((n, p) => n + p.pcm.length - p.offset, 0);
    return within(sent, (queued / this.sampleRate) * 1000 + 10_000, 'the microphone sending an utterance');
  }

  private async pump(): Promise<void> {
    const step = this.sampleRate / 50;
    while (this.running) {
      const chunk = new Int16Array(step);
      const head = this.pending[0];
      if (head) {
        if (head.offset === 0) this.spoken.push({ start: performance.now(), end: -1 });
        chunk.set(head.pcm.subarray(head.offset, head.offset + step));
        head.offset += step;
        if (head.offset >= head.pcm.length) {
          this.pending.shift();
          this.spoken.at(-1)!.end = performance.now();
          head.resolve();
        }
      }
      await this.source.captureFrame(new AudioFrame(chunk, this.sampleRate, 1, step)).catch(() => {});
    }
  }

  async close(): Promise<void> {
    this.running = false;
    await within(this.done, 5_000, 'the microphone closing (a capture rtc-node never completed)');
  }
}

/**
 * A/V offsets in an MP4 of the avatar drawn with its sync marker (white while its audio is speech):
 * for each rising edge of the marker, video − audio in ms against the nearest rising edge of the
 * audio (within 400 ms), both by their times in the file. Edges need `minOffMs` of off before them.
 */
export async function mp4SyncOffsets(
  file: string,
  minOffMs = 350,
): Promise<{ offsets: number[]; audioOnsets: number[] }> {
  const { spawnSync } = await import('node:child_process');
  const { resolveFfmpegPath } = await import('../render/encode/index.ts');
  const ffmpeg = (args: string[]) =>
    spawnSync(resolveFfmpegPath(), ['-v', 'error', '-i', file, ...args], { maxBuffer: 256 << 20 }).stdout;
  // The marker's square averaged to one grey pixel per frame.
  const marker = ffmpeg(['-an', '-vf', 'crop=32:32:0:0,scale=1:1', '-pix_fmt', 'gray', '-f', 'rawvideo', '-']);
  const fps = 25;
  const videoOn = onsets(
    [...marker].map((luma, k) => ({ at: (k * 1000) / fps, on: luma > 128 })),
    minOffMs,
  );
  const pcmBytes = ffmpeg(['-vn', '-ac', '1', '-ar', '24000', '-f', 's16le', '-']);
  const pcm = new Int16Array(pcmBytes.buffer, pcmBytes.byteOffset, pcmBytes.byteLength >> 1);
  const step = 240;
  const points: { at: number; on: boolean }[] = [];
  for (let i = 0; i + step <= pcm.length; i += step) {
    let sum = 0;
    for (let k = i; k < i + step; k++) sum += Math.abs(pcm[k]!);
    points.push({ at: (i * 1000) / 24_000, on: sum / step > 1500 });
  }
  const audioOn = onsets(points, minOffMs);
  const offsets = videoOn
    .map((v) => audioOn.reduce((best, a) => (Math.abs(v - a) < Math.abs(best) ? v - a : best), Infinity))
    .filter((o) => Math.abs(o) < 400);
  return { offsets, audioOnsets: audioOn };
}

/** The median of `values` (the middle one, the upper of two). */
export function median(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
}
