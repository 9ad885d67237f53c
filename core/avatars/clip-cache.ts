import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { text } from 'node:stream/consumers';
import { MANIFEST_FILE } from '../../render/framecache/format.ts';
import { DEFAULT_FPS, DEFAULT_FRAME_SIZE, REVIEWED_LIMITS } from '../../render/generate/index.ts';
import type { Sql, Tx } from '../platform/db/index.ts';
import type { JobContext, JobQueue } from '../platform/jobs/queue.ts';
import type { Logger } from '../platform/log.ts';
import type { ObjectStorage } from '../platform/storage/index.ts';
import { clipPrefix } from './clips.ts';
import type { RenderProcesses } from './render-process.ts';
import { deleteObjects, uploadFrameCache } from './render-outputs.ts';
import {
  AVATAR_CLIP_CACHE_DEAD_JOB,
  AVATAR_CLIP_CACHE_JOB,
  type AvatarClipRow,
  type ClipCacheJobData,
} from './types.ts';
import { UPLOAD_CLIP_MAX_BYTES } from './upload-pose.ts';

/**
 * Frame caches of accepted UPLOADED clips. An uploaded clip is accepted with only its MP4 (pose
 * validation, ClipWorker.validateUpload, or a person's review, ClipLibrary.review); live calls play
 * frame caches, so the transaction that accepts it also queues this job, which builds the cache
 * (enqueueClipCache, clips.ts) from the stored MP4 (render/framecache/from-video.ts, in a child process) and sets `cache_key`:
 * the clip then plays (core/avatars/playback.ts: availability `ready`).
 *
 * The cache matches the avatar's idle loop (its fps and picture size, read from the serving loop's
 * manifest; the loop worker's defaults, 25 fps and 512x512, before a loop has published), the video
 * fitted in and padded (never cropped), because a call plays clips and loop interchangeably and
 * only clips of the loop's size. A video the builder refuses (no face in too many frames, too
 * long...) fails the clip (`failed`, with the reason in `error`; its MP4 stays as it was).
 *
 * Stale jobs change nothing: the cache is published only while the clip still serves the MP4 of the
 * job's `generationId` and has no cache yet (a re-declaration, a new review or a retirement since
 * moved or cleared it), and the avatar lives.
 */

/** Longest uploaded clip a frame cache is built for, in seconds (the 18 MB ceiling bounds it too). */
const UPLOADED_CLIP_MAX_SECONDS = 60;

export interface ClipCacheWorkerDeps {
  sql: Sql;
  jobs: JobQueue;
  storage: ObjectStorage;
  log: Logger;
  renders: RenderProcesses;
  concurrency: number;
  /** ffmpeg binary (config FFMPEG_PATH); default the @ffmpeg-installer build. */
  ffmpegPath?: string;
}

/** The loop's playback settings the clip must share. */
interface LoopSettings {
  fps: number;
  width: number;
  height: number;
}

export class ClipCacheWorker {
  constructor(private readonly d: ClipCacheWorkerDeps) {}

  async start(): Promise<void> {
    await this.d.jobs.work<ClipCacheJobData>(AVATAR_CLIP_CACHE_JOB, (data, job) => this.run(data, job), {
      concurrency: this.d.concurrency,
    });
    await this.d.jobs.work<ClipCacheJobData>(AVATAR_CLIP_CACHE_DEAD_JOB, (data) =>
      this.fail(data, 'Preparing the clip for playback failed: its worker stopped repeatedly'),
    );
  }

  /** The clip as the job may still act on it: the job's MP4 serving, no cache yet, avatar live. */
  private async current(
    q: Sql | Tx,
    data: ClipCacheJobData,
    lock = false,
  ): Promise<(AvatarClipRow & { serving_cache_key: string | null }) | undefined> {
    const [row] = await q<(AvatarClipRow & { serving_cache_key: string | null })[]>`
      select c.*, a.serving_cache_key from avatar_clips c join avatars a on a.id = c.avatar_id
      where c.avatar_id = ${data.avatarId} and a.tenant_id = ${data.tenantId} and a.deleted_at is null
        and c.clip_id = ${data.clipId} and c.retired_at is null and c.source_kind = 'upload' and c.status = 'ready'
        and c.generation_id = ${data.generationId} and c.mp4_key is not null and c.cache_key is null
      ${lock ? q`for update of c for share of a` : q``}`;
    return row;
  }

  async run(data: ClipCacheJobData, job: JobContext): Promise<void> {
    const log = this.d.log.child({
      job: job.id,
      avatarId: data.avatarId,
      clipId: data.clipId,
      attempt: job.retryCount,
    });
    const clip = await this.current(this.d.sql, data);
    if (!clip) {
      log.info('clip cache job no longer current, skipped');
      return;
    }
    const cacheKey = `${clipPrefix(data, data.generationId)}/cache`;
    const work = await mkdtemp(path.join(os.tmpdir(), 'clip-cache-'));
    let uploaded: string[] = [];
    try {
      const loop = await this.loopSettings(clip.serving_cache_key);
      const videoPath = path.join(work, 'clip.mp4');
      await pipeline(await this.d.storage.get(clip.mp4_key!), createWriteStream(videoPath));
      const reviewed = Boolean((clip.pose_check as { review?: unknown } | null)?.review);
      const result = await this.d.renders.videoCache({
        videoPath,
        outDir: path.join(work, 'cache'),
        options: {
          ...loop,
          fit: 'pad',
          quality: 90,
          maxSeconds: UPLOADED_CLIP_MAX_SECONDS,
          maxInputBytes: UPLOAD_CLIP_MAX_BYTES,
          kind: 'clip',
          loop: false,
          // A person accepted this clip's pose: animate whatever the rig can still fit.
          ...(reviewed ? { limits: REVIEWED_LIMITS } : {}),
          meta: { avatarId: data.avatarId, clipId: data.clipId, generationId: data.generationId },
          ...(this.d.ffmpegPath ? { ffmpegPath: this.d.ffmpegPath } : {}),
        },
      });
      if (!result.ok) {
        log.warn({ refused: result.refused }, 'uploaded clip refused by the frame cache builder');
        await this.fail(
          data,
          `The clip cannot be prepared for playback (${result.refused.code}): ${result.refused.message}`,
        );
        return;
      }
      await uploadFrameCache(this.d.storage, cacheKey, result.cacheDir, uploaded);
      const published = await this.d.sql.begin(async (tx) => {
        if (!(await this.current(tx, data, true))) return false;
        await tx`
          update avatar_clips set cache_key = ${cacheKey}, updated_at = now()
          where avatar_id = ${data.avatarId} and clip_id = ${data.clipId}`;
        return true;
      });
      if (!published) {
        log.info('clip no longer current before publishing its cache, discarded');
        await deleteObjects(this.d.storage, log, uploaded);
        return;
      }
      uploaded = [];
      log.info(
        { cacheKey, frames: result.frameCount, msPerFrame: Math.round(result.stats.totalMs / result.frameCount) },
        'uploaded clip cache published',
      );
    } catch (err) {
      await deleteObjects(this.d.storage, log, uploaded);
      if (job.retryCount >= job.retryLimit) {
        log.warn({ err }, 'uploaded clip cache failed');
        await this.fail(data, `Preparing the clip for playback failed after ${job.retryCount + 1} attempts`);
        return;
      }
      log.warn({ err }, 'uploaded clip cache attempt failed, will retry');
      throw err;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /** Fps and size of the avatar's serving loop (its manifest), or the loop worker's defaults before one published. */
  private async loopSettings(loopCacheKey: string | null): Promise<LoopSettings> {
    if (!loopCacheKey) return { fps: DEFAULT_FPS, width: DEFAULT_FRAME_SIZE, height: DEFAULT_FRAME_SIZE };
    const m = JSON.parse(await text(await this.d.storage.get(`${loopCacheKey}/${MANIFEST_FILE}`))) as LoopSettings;
    return { fps: m.fps, width: m.width, height: m.height };
  }

  /** Fails the clip (only while it is still the job's generation without a cache). */
  private async fail(data: ClipCacheJobData, error: string): Promise<void> {
    await this.d.sql`
      update avatar_clips c set status = 'failed', error = ${error}, updated_at = now()
      from avatars a
      where c.avatar_id = ${data.avatarId} and c.clip_id = ${data.clipId} and c.retired_at is null and c.source_kind = 'upload'
        and c.status = 'ready' and c.generation_id = ${data.generationId} and c.cache_key is null
        and a.id = c.avatar_id and a.tenant_id = ${data.tenantId} and a.deleted_at is null`;
  }
}
