import { constants, createWriteStream } from 'node:fs';
import { access, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { resolveFfmpegPath } from '../../render/encode/mp4.ts';
import { DETECTOR_FILE, LANDMARK_FILE, MODEL_DIR } from '../../render/rig/models.ts';
import type { RenderProcesses } from '../avatars/render-process.ts';
import { deleteObjects, renderObjectKeys, uploadFrameCache } from '../avatars/render-outputs.ts';
import type { Sql } from '../platform/db/index.ts';
import type { JobContext, JobQueue } from '../platform/jobs/queue.ts';
import type { Logger } from '../platform/log.ts';
import type { SafeFetcher } from '../platform/net/safe-fetch.ts';
import type { ObjectStorage } from '../platform/storage/index.ts';
import { videoCacheIdOf } from './ids.ts';
import { downloadSource, SceneSourceError } from './source.ts';
import {
  SCENE_BUILD_DEAD_JOB,
  SCENE_BUILD_JOB,
  SCENE_FPS,
  type SceneBuildJobData,
  type SceneErrorCode,
  type SceneRow,
} from './types.ts';

/**
 * The scene builder: a durable job (`scene-build`) per build. It gets the clip (staged in storage by
 * the POST that downloaded it, or downloaded here through the safe fetcher and checked against the
 * md5 and bytes the client named), builds its frame cache (render/framecache/from-video.ts in a
 * child process: the picture fitted in SCENE_FRAME_SIZE with its aspect kept, 25 fps, every frame's
 * face tracked) and publishes it: the row turns `ready` with its `video_cache_id` and `cache_key`,
 * which is what a scene call plays (core/scenes/media.ts).
 *
 * What a failure does to the row (`failed`, with `error` and `error_message`), at once, without retry:
 * - the download fails (address rules, DNS, connect, HTTP status, timeouts): `source_unreachable`;
 * - the clip is over SCENE_MAX_BYTES, or the builder refuses it (not a video, too short or long, no
 *   usable face in too many frames or for too long): `source_unusable`;
 * - the bytes are not the md5 and bytes named: `source_mismatch`.
 * Anything else (a crash, storage down) is retried by the job queue; on the last attempt, or when
 * its workers died every time (the dead-letter queue), the row fails with `build_failed`.
 * A job whose build is no longer the row's (the scene expired and was prepared again) does nothing.
 */

/** Storage prefix of one build of a scene: its frame cache is `<prefix>/cache`. */
function scenePrefix(tenantId: string, sceneId: string, buildId: string): string {
  return `tenants/${tenantId}/scenes/${sceneId}/${buildId}`;
}

/** The objects of a scene's frame cache. */
export function sceneCacheObjects(cacheKey: string | null): string[] {
  return renderObjectKeys(null, cacheKey);
}

const BUILDER_CHECK_TTL_MS = 30_000;

/**
 * Why the scene builder cannot run on this server, or undefined when it can: ffmpeg (FFMPEG_PATH,
 * or the bundled build) missing or not executable, or the face models missing. Checked at most
 * every 30 s; POST /scenes answers 503 scene_builder_unavailable while there is a problem.
 */
export function sceneBuilderCheck(ffmpegPath: string | undefined): () => Promise<string | undefined> {
  let last: { at: number; problem: Promise<string | undefined> } | undefined;
  const check = async (): Promise<string | undefined> => {
    let bin: string;
    try {
      bin = resolveFfmpegPath({ FFMPEG_PATH: ffmpegPath });
    } catch {
      return 'no ffmpeg is installed';
    }
    try {
      await access(bin, constants.X_OK);
    } catch {
      return `ffmpeg (${path.basename(bin)}) is missing or not executable`;
    }
    for (const f of [DETECTOR_FILE, LANDMARK_FILE]) {
      try {
        await access(path.join(MODEL_DIR, f), constants.R_OK);
      } catch {
        return `the face model ${f} is missing`;
      }
    }
    return undefined;
  };
  return () => {
    if (!last || Date.now() - last.at > BUILDER_CHECK_TTL_MS) last = { at: Date.now(), problem: check() };
    return last.problem;
  };
}

export interface SceneBuildWorkerDeps {
  sql: Sql;
  jobs: JobQueue;
  storage: ObjectStorage;
  log: Logger;
  renders: RenderProcesses;
  /** The safe fetcher (a scene's URL is the client's). */
  fetcher: SafeFetcher;
  concurrency: number;
  /** SCENE_MAX_BYTES, SCENE_MAX_SECONDS, SCENE_FRAME_SIZE. */
  maxBytes: number;
  maxSeconds: number;
  frameSize: number;
  /** ffmpeg binary (config FFMPEG_PATH); default the bundled build. */
  ffmpegPath?: string;
}

export class SceneBuildWorker {
  constructor(private readonly d: SceneBuildWorkerDeps) {}

  async start(): Promise<void> {
    await this.d.jobs.work<SceneBuildJobData>(SCENE_BUILD_JOB, (data, job) => this.run(data, job), {
      concurrency: this.d.concurrency,
    });
    await this.d.jobs.work<SceneBuildJobData>(SCENE_BUILD_DEAD_JOB, (data) =>
      this.fail(data, 'build_failed', 'The scene build failed: its worker stopped repeatedly'),
    );
  }

  async run(data: SceneBuildJobData, job: JobContext): Promise<void> {
    const log = this.d.log.child({
      job: job.id,
      sceneId: data.sceneId,
      buildId: data.buildId,
      attempt: job.retryCount,
    });
    const [row] = await this.d.sql<SceneRow[]>`
      select * from scenes where tenant_id = ${data.tenantId} and id = ${data.sceneId} and build_id = ${data.buildId} and status = 'building'`;
    if (!row) {
      log.info('scene build no longer current, skipped');
      return;
    }
    const work = await mkdtemp(path.join(os.tmpdir(), 'scene-build-'));
    const videoPath = path.join(work, 'source');
    let uploaded: string[] = [];
    try {
      if (row.source_key) {
        await pipeline(await this.d.storage.get(row.source_key), createWriteStream(videoPath));
      } else {
        try {
          const named = {
            md5: row.source_md5 ?? undefined,
            bytes: row.source_bytes === null ? undefined : Number(row.source_bytes),
          };
          await downloadSource(this.d.fetcher, row.source_url, { maxBytes: this.d.maxBytes, expected: named }, (body) =>
            pipeline(body, createWriteStream(videoPath)),
          );
        } catch (err) {
          if (!(err instanceof SceneSourceError)) throw err;
          log.info({ error: err.error, reason: err.message }, 'scene source refused');
          await this.fail(data, err.error, err.message);
          return;
        }
      }
      const result = await this.d.renders.videoCache({
        videoPath,
        outDir: path.join(work, 'cache'),
        options: {
          fps: SCENE_FPS,
          width: this.d.frameSize,
          height: this.d.frameSize,
          fit: 'contain',
          quality: 90,
          maxSeconds: this.d.maxSeconds,
          maxInputBytes: this.d.maxBytes,
          kind: 'clip',
          loop: false,
          meta: { sceneId: data.sceneId, profile: row.profile },
          ...(this.d.ffmpegPath ? { ffmpegPath: this.d.ffmpegPath } : {}),
        },
      });
      if (!result.ok) {
        log.info({ refused: result.refused }, 'scene clip refused by the builder');
        await this.fail(
          data,
          'source_unusable',
          `The clip cannot be a scene (${result.refused.code}): ${result.refused.message}`,
        );
        return;
      }
      const cacheKey = await uploadFrameCache(
        this.d.storage,
        `${scenePrefix(data.tenantId, data.sceneId, data.buildId)}/cache`,
        result.cacheDir,
        uploaded,
      );
      const published = await this.d.sql`
        update scenes set status = 'ready', video_cache_id = ${videoCacheIdOf(data.sceneId, row.profile)}, cache_key = ${cacheKey},
          frame_count = ${result.frameCount}, fps = ${result.fps}, width = ${result.width}, height = ${result.height},
          duration_seconds = ${result.frameCount / result.fps}, source_key = null, ready_at = now(), updated_at = now()
        where tenant_id = ${data.tenantId} and id = ${data.sceneId} and build_id = ${data.buildId} and status = 'building'`;
      if (published.count === 0) {
        log.info('scene build no longer current before publishing, discarded');
        await deleteObjects(this.d.storage, log, uploaded);
        return;
      }
      uploaded = [];
      log.info(
        { frames: result.frameCount, msPerFrame: Math.round(result.stats.totalMs / result.frameCount) },
        'scene ready',
      );
      if (row.source_key) await deleteObjects(this.d.storage, log, [row.source_key]);
    } catch (err) {
      await deleteObjects(this.d.storage, log, uploaded);
      if (job.retryCount >= job.retryLimit) {
        log.warn({ err }, 'scene build failed');
        await this.fail(data, 'build_failed', `The scene build failed after ${job.retryCount + 1} attempts`);
        return;
      }
      log.warn({ err }, 'scene build attempt failed, will retry');
      throw err;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /** Fails the build (only while it is still the row's), and drops its staged clip. */
  private async fail(data: SceneBuildJobData, error: SceneErrorCode, message: string): Promise<void> {
    const [row] = await this.d.sql<{ staged: string | null }[]>`
      update scenes s set status = 'failed', error = ${error}, error_message = ${message.slice(0, 1000)}, source_key = null, updated_at = now()
      from (select source_key from scenes where tenant_id = ${data.tenantId} and id = ${data.sceneId} for update) old
      where s.tenant_id = ${data.tenantId} and s.id = ${data.sceneId} and s.build_id = ${data.buildId} and s.status = 'building'
      returning old.source_key as staged`;
    if (row?.staged) await deleteObjects(this.d.storage, this.d.log, [row.staged]);
  }
}
