import { createReadStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MANIFEST_FILE, type FrameCacheManifest } from '../../render/framecache/format.ts';
import { DEFAULT_FPS } from '../../render/generate/index.ts';
import type { LipsyncJobRequest, LipsyncJobResult } from '../../render/talking-head/job.ts';
import { decodeAudio } from '../../render/talking-head/speech.ts';
import { TalkingHeadError } from '../../render/talking-head/errors.ts';
import type { AssetStore } from '../assets/index.ts';
import { loadAvatarPlayback } from '../avatars/playback.ts';
import { ChildJobs, ChildJobTimeout, RenderProcesses } from '../avatars/render-process.ts';
import type { AvatarService } from '../avatars/service.ts';
import { MICROS_PER_SECOND } from '../credits/ledger.ts';
import type { Sql } from '../platform/db/index.ts';
import { ApiError, notFound } from '../platform/errors.ts';
import type { Logger } from '../platform/log.ts';
import type { SafeFetcher } from '../platform/net/safe-fetch.ts';
import { MAX_SIGNED_URL_TTL_SECONDS, type ObjectStorage } from '../platform/storage/index.ts';
import type { UsageStore } from '../usage.ts';
import { LocalFrameCaches } from '../platform/storage/frame-caches.ts';
import { fetchMedia, type FetchedMedia } from './media.ts';
import { LipsyncPortraits, type SpeakingAvatar } from './portraits.ts';

/** The lipsync render's program (render/talking-head/job.ts in a process of its own). */
const CHILD = fileURLToPath(new URL('../../render/cli/lipsync-job.ts', import.meta.url));
/** Rate the audio is decoded at to measure its length before anything is reserved. */
const PROBE_SAMPLE_RATE = 8000;

interface LipsyncLimits {
  maxAudioSeconds: number;
  maxAudioBytes: number;
  maxPortraitBytes: number;
  timeoutSeconds: number;
  concurrency: number;
  portraitLoopSeconds: number;
  /** LIPSYNC_MODEL: `builtin` or a Wav2Lip-class ONNX model. */
  lipsyncModel: string;
}

export interface LipsyncServiceDeps {
  sql: Sql;
  storage: ObjectStorage;
  assets: AssetStore;
  avatars: AvatarService;
  usage: UsageStore;
  safeFetch: SafeFetcher;
  log: Logger;
  /** Local copies of frame caches live here (one folder per cache). */
  cacheDir: string;
  limits: LipsyncLimits;
}

export interface LipsyncRequest {
  tenantId: string;
  apiKeyId: string | null;
  audioUrl: string;
  avatarId?: string;
  portraitUrl?: string;
  /** The client went away: stop and bill nothing. */
  signal?: AbortSignal;
}

export interface LipsyncResult {
  url: string;
  avatarId: string;
  frames: number;
  fps: number;
  durationSeconds: number;
  /** The usage row (kind lipsync) that billed it. */
  sessionId: string;
}

/** Storage key of a lipsync result: beside the workspace's other media, named by its usage session. */
function lipsyncResultKey(tenantId: string, sessionId: string): string {
  return `tenants/${tenantId}/lipsync/${sessionId}.mp4`;
}

/** Waiting turns for a limited number of concurrent renders. */
class Slots {
  private free: number;
  private readonly waiting: (() => void)[] = [];
  constructor(n: number) {
    this.free = n;
  }
  async take(signal: AbortSignal): Promise<() => void> {
    if (this.free > 0) this.free--;
    else {
      await new Promise<void>((resolve, reject) => {
        const turn = () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = () => {
          this.waiting.splice(this.waiting.indexOf(turn), 1);
          reject(signal.reason);
        };
        this.waiting.push(turn);
        signal.addEventListener('abort', onAbort, { once: true });
      });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    };
  }
}

/**
 * POST /lipsync: given audio lip-synced over an avatar's idle loop (or over a portrait registered on
 * the fly), rendered to an MP4 in a child process, stored, and answered as a signed URL. Billed as
 * realtime seconds like a turn: the audio's length is measured first, then exactly the video's
 * seconds are reserved (402 before anything is rendered), and the reservation settles to the
 * rendered seconds, or to nothing when the render fails (usage row kind `lipsync`: reserved,
 * started, then released or failed).
 */
export class LipsyncService {
  private readonly renders = new RenderProcesses();
  private readonly children = new ChildJobs();
  private readonly caches: LocalFrameCaches;
  private readonly portraits: LipsyncPortraits;
  private readonly slots: Slots;

  constructor(private readonly d: LipsyncServiceDeps) {
    this.caches = new LocalFrameCaches(d.storage, d.cacheDir);
    this.portraits = new LipsyncPortraits({
      sql: d.sql,
      storage: d.storage,
      assets: d.assets,
      avatars: d.avatars,
      log: d.log,
      renders: this.renders,
      loopSeconds: d.limits.portraitLoopSeconds,
    });
    this.slots = new Slots(d.limits.concurrency);
  }

  async render(req: LipsyncRequest): Promise<LipsyncResult> {
    const limits = this.d.limits;
    const deadline = AbortSignal.timeout(limits.timeoutSeconds * 1000);
    const signal = req.signal ? AbortSignal.any([req.signal, deadline]) : deadline;
    const work = await mkdtemp(path.join(os.tmpdir(), 'lipsync-'));
    try {
      return await this.run(req, work, signal);
    } catch (err) {
      if (deadline.aborted && !(err instanceof ApiError)) {
        throw new ApiError(
          'render_failed',
          `The lipsync did not finish within ${limits.timeoutSeconds} s: retry, or send shorter audio`,
        );
      }
      throw err;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  private async run(req: LipsyncRequest, work: string, signal: AbortSignal): Promise<LipsyncResult> {
    const limits = this.d.limits;
    const fetchDeps = { storage: this.d.storage, fetcher: this.d.safeFetch };

    // 1. What speaks: a ready avatar of the workspace, or the portrait's bytes (registered later).
    let subject: SpeakingAvatar | undefined;
    let portrait: FetchedMedia | undefined;
    if (req.avatarId !== undefined) {
      const playback = await loadAvatarPlayback(this.d.sql, req.tenantId, req.avatarId);
      if (!playback) throw notFound('Avatar');
      if (playback.status !== 'ready' || !playback.loopCacheKey) {
        throw new ApiError(
          'avatar_state_conflict',
          `The avatar is ${playback.status} and has no idle loop to speak over yet: retry once it is ready`,
          { avatarStatus: playback.status },
        );
      }
      subject = { avatarId: playback.avatarId, cacheKey: playback.loopCacheKey };
    } else {
      portrait = await fetchMedia(
        {
          url: req.portraitUrl!,
          field: 'portraitUrl',
          kind: 'image',
          maxBytes: limits.maxPortraitBytes,
          tenantId: req.tenantId,
          path: path.join(work, 'portrait'),
          signal,
        },
        fetchDeps,
      );
      subject = await this.portraits.find(req.tenantId, portrait.sha256);
    }

    // 2. The audio, and its length: what the render will bill.
    const audio = await fetchMedia(
      {
        url: req.audioUrl,
        field: 'audioUrl',
        kind: 'audio',
        maxBytes: limits.maxAudioBytes,
        tenantId: req.tenantId,
        path: path.join(work, 'audio'),
        signal,
      },
      fetchDeps,
    );
    let samples: Int16Array;
    try {
      samples = await decodeAudio(audio.path, PROBE_SAMPLE_RATE, limits.maxAudioSeconds);
    } catch (err) {
      throw audioRefusal(err, limits.maxAudioSeconds);
    }
    let cacheDir: string | undefined;
    let fps = DEFAULT_FPS;
    if (subject) {
      try {
        cacheDir = await this.caches.local(subject.cacheKey);
        fps = await manifestFps(cacheDir);
      } catch (err) {
        this.d.log.error(
          { err, avatarId: subject.avatarId, cacheKey: subject.cacheKey },
          'idle loop frame cache unreadable',
        );
        throw new ApiError(
          'render_failed',
          "The avatar's idle loop could not be read: retry, and quote the requestId if it persists",
        );
      }
    }
    // One frame of slack: decoding at the render's rate may round the length up to the next frame.
    const frames = Math.ceil((samples.length / PROBE_SAMPLE_RATE) * fps - 1e-9) + 1;
    const reserveMicros = Math.ceil((frames * MICROS_PER_SECOND) / fps);

    // 3. Reserve the video's seconds: 402 here, before anything is rendered.
    const { sessionId } = await this.d.usage.open({
      tenantId: req.tenantId,
      apiKeyId: req.apiKeyId,
      kind: 'lipsync',
      avatarId: subject?.avatarId ?? null,
      reserveCreditMicros: reserveMicros,
      ttlSeconds: limits.timeoutSeconds + 60,
    });
    await this.d.usage.start(sessionId);
    const log = this.d.log.child({ sessionId, tenantId: req.tenantId });
    let stored: string | undefined;
    try {
      // 4. A new portrait is registered (rigged, animated) now that the work is paid for.
      if (!subject) {
        subject = await this.portraits.obtain(req.tenantId, portrait!, signal);
        await this.d.usage.attachAvatar(sessionId, subject.avatarId);
      }
      const loopDir = cacheDir ?? (await this.caches.local(subject.cacheKey));

      // 5. Render in a child process, a limited number at once.
      const out = path.join(work, 'out.mp4');
      const release = await this.slots.take(signal);
      let result: LipsyncJobResult;
      try {
        const job: LipsyncJobRequest = {
          cacheDir: loopDir,
          audioPath: audio.path,
          out,
          lipsyncModel: limits.lipsyncModel,
          maxSeconds: limits.maxAudioSeconds,
        };
        result = await this.children.run<LipsyncJobResult>(CHILD, job, { what: 'lipsync render', signal });
      } finally {
        release();
      }
      if (!result.ok)
        throw audioRefusal(
          new TalkingHeadError(result.refused.code as TalkingHeadError['code'], result.refused.message),
          limits.maxAudioSeconds,
        );

      // 6. Store, then settle to the rendered seconds.
      const key = lipsyncResultKey(req.tenantId, sessionId);
      await this.d.storage.put(key, createReadStream(out), { contentType: 'video/mp4' });
      stored = key;
      const billableMs = (result.frames * 1000) / result.fps;
      await this.d.usage.finish(sessionId, { status: 'released', billableMs });
      log.info({ avatarId: subject.avatarId, frames: result.frames, fps: result.fps }, 'lipsync rendered');
      return {
        url: await this.d.storage.signedUrl(key, MAX_SIGNED_URL_TTL_SECONDS),
        avatarId: subject.avatarId,
        frames: result.frames,
        fps: result.fps,
        durationSeconds: result.frames / result.fps,
        sessionId,
      };
    } catch (err) {
      await this.d.usage
        .finish(sessionId, { status: 'failed', billableMs: 0 })
        .catch((e: unknown) => log.error({ err: e }, 'lipsync usage could not be settled'));
      if (stored) await this.d.storage.delete(stored).catch(() => {});
      if (err instanceof ApiError || signal.aborted) throw err;
      log.warn({ err }, 'lipsync render failed');
      throw new ApiError(
        'render_failed',
        err instanceof ChildJobTimeout
          ? 'The lipsync render ran past its time limit: retry'
          : 'The lipsync render failed: retry, and quote the requestId if it persists',
      );
    }
  }

  /** Kills the renders under way (their requests fail unbilled). */
  close(): void {
    this.children.killAll();
    this.renders.killAll();
  }
}

/** The 422 of audio the decoder refused, naming audioUrl; anything else passes through. */
function audioRefusal(err: unknown, maxSeconds: number): unknown {
  if (!(err instanceof TalkingHeadError)) return err;
  if (err.code === 'audio_too_long') {
    return new ApiError(
      'audio_too_long',
      `Invalid field "audioUrl": the audio is longer than the cap of ${maxSeconds} s`,
      { field: 'audioUrl', maxSeconds },
    );
  }
  return new ApiError('invalid_audio', `Invalid field "audioUrl": ${err.message}`, { field: 'audioUrl' });
}

/** The frame rate of a local frame cache: the video's. */
async function manifestFps(cacheDir: string): Promise<number> {
  const manifest = JSON.parse(await readFile(path.join(cacheDir, MANIFEST_FILE), 'utf8')) as FrameCacheManifest;
  return manifest.fps;
}
