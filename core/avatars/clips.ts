import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Sql, Tx } from '../platform/db/index.ts';
import { randomBase62 } from '../platform/ids.ts';
import type { JobContext, JobQueue } from '../platform/jobs/queue.ts';
import type { Logger } from '../platform/log.ts';
import type { ObjectStorage } from '../platform/storage/index.ts';
import type { DefaultClip } from '../../clips/declaration/default-clips.ts';
import type { PortraitAssets } from './ports.ts';
import { isRigError } from '../../render/rig/index.ts';
import { finalRenderFailure, RenderRefused, type RenderProcesses } from './render-process.ts';
import { deleteObjects, renderObjectKeys, uploadRender } from './render-outputs.ts';
import {
  AVATAR_CLIP_CACHE_DEAD_JOB,
  AVATAR_CLIP_CACHE_JOB,
  AVATAR_CLIPS_DEAD_JOB,
  AVATAR_CLIPS_JOB,
  type ClipCacheJobData,
  type AvatarClipRow,
  type AvatarRow,
  type ClipJobData,
  type MotionLibraryClip,
} from './types.ts';
import {
  anchorPose,
  type AnchorPose,
  checkUploadedClip,
  UPLOAD_CLIP_MAX_BYTES,
  type UploadPoseCheck,
} from './upload-pose.ts';

/**
 * The motion library's clips (table `avatar_clips`, migration 0006): queueing the default set when
 * an avatar's first idle loop publishes, and the worker that renders generated clips.
 *
 * One job per clip (`avatar-clips`, data ClipJobData): each clip retries on its own (the loop
 * job's pg-boss retry options), and clips of one avatar render in parallel across workers.
 */

/** Signed clip URLs last as long as the avatar's servingUrl. */
const CLIP_URL_TTL_SECONDS = 3600;

/** Storage prefix of one render of a clip: tenants/<t>/avatars/<a>/clips/<clipId>/<generationId>. */
export function clipPrefix(d: Pick<ClipJobData, 'tenantId' | 'avatarId' | 'clipId'>, generationId: string): string {
  return `tenants/${d.tenantId}/avatars/${d.avatarId}/clips/${d.clipId}/${generationId}`;
}

export async function enqueueClip(tx: Tx, jobs: JobQueue, data: ClipJobData): Promise<void> {
  await jobs.enqueue(AVATAR_CLIPS_JOB, data, { deadLetter: AVATAR_CLIPS_DEAD_JOB }, tx);
}

/**
 * Inside the transaction that accepts an uploaded clip (sets its mp4_key and generation_id): the
 * job that builds its frame cache (ClipCacheWorker, clip-cache.ts), so it can play in calls.
 */
export async function enqueueClipCache(tx: Tx, jobs: JobQueue, data: ClipCacheJobData): Promise<void> {
  await jobs.enqueue(AVATAR_CLIP_CACHE_JOB, data, { deadLetter: AVATAR_CLIP_CACHE_DEAD_JOB }, tx);
}

/**
 * Inside the transaction that publishes an avatar's loop (the avatar row locked): when the avatar
 * has no clips at all yet (and never declared its clip library), inserts the default clips (`queued`, `is_default`) and enqueues one job
 * per clip. A later publish (PUT loop, a swap) finds rows and adds nothing. Returns the clips queued.
 */
export async function queueDefaultClips(
  tx: Tx,
  jobs: JobQueue,
  d: Pick<ClipJobData, 'tenantId' | 'avatarId' | 'reviewed'>,
  clips: readonly DefaultClip[],
): Promise<number> {
  if (clips.length === 0) return 0;
  const [existing] = await tx`select 1 from avatar_clips where avatar_id = ${d.avatarId} limit 1`;
  if (existing) return 0;
  // A clip-library declaration (PUT clips, even an empty one) replaces the defaults for good.
  const [declared] = await tx`select 1 from avatars where id = ${d.avatarId} and clip_revision > 0`;
  if (declared) return 0;
  for (const c of clips) {
    await tx`
      insert into avatar_clips (avatar_id, clip_id, status, source_kind, motion_prompt, duration_seconds, is_default)
      values (${d.avatarId}, ${c.clipId}, 'queued', 'generated', ${c.motionPrompt}, ${c.durationSeconds}, true)`;
    await enqueueClip(tx, jobs, { ...d, clipId: c.clipId });
  }
  return clips.length;
}

/** The avatar's live (not retired) clips as `Avatar.motionLibrary`, by avatar id. */
export async function motionLibraries(
  sql: Sql | Tx,
  storage: ObjectStorage,
  avatarIds: string[],
): Promise<Map<string, MotionLibraryClip[]>> {
  const out = new Map<string, MotionLibraryClip[]>(avatarIds.map((id) => [id, []]));
  if (avatarIds.length === 0) return out;
  const rows = await sql<AvatarClipRow[]>`
    select * from avatar_clips where avatar_id = any(${avatarIds}) and retired_at is null order by created_at, clip_id`;
  for (const r of rows) {
    out.get(r.avatar_id)?.push({
      clipId: r.clip_id,
      status: r.status,
      url: r.mp4_key ? await storage.signedUrl(r.mp4_key, CLIP_URL_TTL_SECONDS) : null,
      motionPrompt: r.motion_prompt,
      durationSeconds: r.duration_seconds,
      error: r.error,
    });
  }
  return out;
}

export interface ClipWorkerDeps {
  sql: Sql;
  jobs: JobQueue;
  storage: ObjectStorage;
  assets: PortraitAssets;
  log: Logger;
  /** Runs each render in a child process (shared with the loop worker, killed together on stop). */
  renders: RenderProcesses;
  /** Concurrent clip renders in this process. */
  concurrency: number;
}

/**
 * Renders generated clips, each in a child process (RenderProcesses, the render job with `clip`;
 * a refusal, RenderRefused, fails the clip at once), and pose-validates uploaded ones.
 */
export class ClipWorker {
  private readonly anchors = new Map<string, AnchorPose | { refused: string }>();

  constructor(private readonly d: ClipWorkerDeps) {}

  async start(): Promise<void> {
    await this.d.jobs.work<ClipJobData>(AVATAR_CLIPS_JOB, (data, job) => this.run(data, job), {
      concurrency: this.d.concurrency,
    });
    await this.d.jobs.work<ClipJobData>(AVATAR_CLIPS_DEAD_JOB, (data) => this.dead(data));
  }

  /**
   * Moves the clip's status, only while the avatar is live and the clip is still queued or rendering,
   * and, given `source`, only while the clip still has that source: a render that outlived a
   * re-declaration of its clip must not settle the new source's row.
   */
  private async setStatus(
    data: ClipJobData,
    status: 'queued' | 'rendering' | 'failed',
    error: string | null = null,
    source?: { motionPrompt: string; durationSeconds: number | null },
  ): Promise<boolean> {
    const sql = this.d.sql;
    const rows = await sql`
      update avatar_clips c set status = ${status}, error = ${error}, updated_at = now()
      from avatars a
      where c.avatar_id = ${data.avatarId} and c.clip_id = ${data.clipId} and c.retired_at is null
        and c.status in ('queued', 'rendering') and a.id = c.avatar_id and a.deleted_at is null
        ${
          source
            ? sql`and c.source_kind = 'generated' and c.motion_prompt = ${source.motionPrompt}
                  and c.duration_seconds is not distinct from ${source.durationSeconds}`
            : sql``
        }`;
    return rows.count > 0;
  }

  async run(data: ClipJobData, job: JobContext): Promise<void> {
    const log = this.d.log.child({
      job: job.id,
      avatarId: data.avatarId,
      clipId: data.clipId,
      attempt: job.retryCount,
    });
    const [clip] = await this.d.sql<AvatarClipRow[]>`
      select c.* from avatar_clips c join avatars a on a.id = c.avatar_id
      where c.avatar_id = ${data.avatarId} and a.tenant_id = ${data.tenantId} and a.deleted_at is null
        and c.clip_id = ${data.clipId} and c.retired_at is null and c.status in ('queued', 'rendering')`;
    if (clip?.source_kind === 'upload' && clip.upload_asset_id)
      return this.validateUpload(data, clip.upload_asset_id, job, log);
    if (
      !clip ||
      clip.source_kind !== 'generated' ||
      !clip.motion_prompt ||
      !(await this.setStatus(data, 'rendering'))
    ) {
      // Deleted avatar, retired or already settled clip: nothing to do.
      log.info('clip job no longer current, skipped');
      return;
    }
    const rendered = { motionPrompt: clip.motion_prompt, durationSeconds: clip.duration_seconds };
    // The anchor (portrait) version this render is made for, read with the portrait below.
    let anchorVersion = 0;
    const generationId = `gen_${randomBase62(20)}`;
    const prefix = clipPrefix(data, generationId);
    const work = await mkdtemp(path.join(os.tmpdir(), 'avatar-clip-'));
    let uploaded: string[] = [];
    try {
      const [avatar] = await this.d.sql<AvatarRow[]>`select * from avatars where id = ${data.avatarId}`;
      if (!avatar?.source_asset_id) throw new RenderRefused('The avatar has no portrait to animate');
      anchorVersion = avatar.anchor_version;
      const portraitPath = path.join(work, 'portrait');
      await writeFile(portraitPath, await this.d.assets.readBytes(data.tenantId, avatar.source_asset_id));
      const result = await this.d.renders.render({
        portraitPath,
        outDir: path.join(work, 'out'),
        seed: `${data.avatarId}:${data.clipId}`,
        motionPrompt: null,
        seconds: 0,
        clip: { motionPrompt: clip.motion_prompt, durationSeconds: clip.duration_seconds ?? 5 },
        reviewed: data.reviewed,
      });
      log.info({ frames: result.frames, renderMs: result.renderMs, totalMs: result.totalMs }, 'clip rendered');

      const { mp4Key, cacheKey } = await uploadRender(this.d.storage, prefix, result, 'clip.mp4', uploaded);
      // Publish only while the clip still renders and the avatar lives (the avatar row share-locked
      // so a DELETE waits for, or wins over, this publish).
      const old = await this.d.sql.begin(async (tx) => {
        const [cur] = await tx<AvatarClipRow[]>`
          select c.* from avatar_clips c join avatars a on a.id = c.avatar_id
          where c.avatar_id = ${data.avatarId} and c.clip_id = ${data.clipId} and c.status = 'rendering' and c.retired_at is null
            and a.deleted_at is null
            -- A PUT clips may have re-declared the clip with another source while this rendered,
            -- and a portrait swap may have moved the anchor this was rendered for.
            and c.source_kind = 'generated' and c.motion_prompt = ${clip.motion_prompt}
            and c.duration_seconds is not distinct from ${clip.duration_seconds}
            and a.anchor_version = ${anchorVersion}
          for update of c for share of a`;
        if (!cur) return undefined;
        await tx`
          update avatar_clips set status = 'ready', mp4_key = ${mp4Key}, cache_key = ${cacheKey},
            generation_id = ${generationId}, anchor_version = ${anchorVersion}, error = null, updated_at = now()
          where avatar_id = ${data.avatarId} and clip_id = ${data.clipId}`;
        return cur;
      });
      if (!old) {
        log.info('clip no longer current before publishing, discarded');
        await this.deleteKeys(uploaded);
        return;
      }
      uploaded = [];
      log.info({ mp4Key }, 'clip published');
      // A replaced render's objects go once the new keys serve.
      if (old.mp4_key && old.mp4_key !== mp4Key) {
        await this.deleteKeys(renderObjectKeys(old.mp4_key, old.cache_key));
      }
    } catch (err) {
      await this.deleteKeys(uploaded);
      const failure = finalRenderFailure(err, job, 'Clip');
      if (failure !== undefined) {
        log.warn({ err }, 'clip generation failed');
        await this.setStatus(data, 'failed', failure, rendered);
        return;
      }
      log.warn({ err }, 'clip generation attempt failed, will retry');
      await this.setStatus(data, 'queued', null, rendered);
      throw err;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /**
   * Pose validation of an uploaded clip (upload-pose.ts): the asset's bytes (at most 18 MB), first,
   * middle and last frames through the face rig, each against the anchor (the portrait's rig pose,
   * computed once per portrait asset in this worker). Accepted: the video is copied under the
   * clip's prefix and serves (`ready`), and its frame cache is queued (enqueueClipCache); refused or out of pose: `failed` with the verdict in
   * `pose_check` (a `pose_mismatch` can still be accepted by a person, POST clips/review).
   */
  private async validateUpload(data: ClipJobData, assetId: string, job: JobContext, log: Logger): Promise<void> {
    const sql = this.d.sql;
    const guard = (status: string) => sql`
      update avatar_clips c set status = ${status}, updated_at = now()
      from avatars a
      where c.avatar_id = ${data.avatarId} and c.clip_id = ${data.clipId} and c.retired_at is null
        and c.status in ('queued', 'rendering') and c.source_kind = 'upload' and c.upload_asset_id = ${assetId}
        and a.id = c.avatar_id and a.deleted_at is null`;
    if ((await guard('rendering')).count === 0) {
      log.info('clip job no longer current, skipped');
      return;
    }
    const generationId = `upl_${randomBase62(20)}`;
    const mp4Key = `${clipPrefix(data, generationId)}/clip.mp4`;
    let uploaded = false;
    try {
      const [avatar] = await sql<AvatarRow[]>`select * from avatars where id = ${data.avatarId}`;
      let verdict: UploadPoseCheck;
      const anchor = avatar?.source_asset_id ? await this.anchorFor(data.tenantId, avatar.source_asset_id) : undefined;
      const [asset] = await sql<
        { size_bytes: number | null }[]
      >`select size_bytes from assets where id = ${assetId} and tenant_id = ${data.tenantId}`;
      if (!anchor || 'refused' in anchor) {
        verdict = {
          verdict: 'refused',
          code: 'anchor_unavailable',
          message:
            anchor && 'refused' in anchor
              ? `The avatar's portrait has no usable anchor pose: ${anchor.refused}`
              : 'The avatar has no portrait to compare with',
          frames: [],
          checkedAt: new Date().toISOString(),
        };
      } else if (asset?.size_bytes != null && asset.size_bytes > UPLOAD_CLIP_MAX_BYTES) {
        verdict = {
          verdict: 'refused',
          code: 'too_large',
          message: `The video is ${asset.size_bytes} bytes, over the ${UPLOAD_CLIP_MAX_BYTES}-byte quality-check ceiling`,
          frames: [],
          checkedAt: new Date().toISOString(),
        };
      } else {
        const video = await this.d.assets.readBytes(data.tenantId, assetId);
        verdict = await checkUploadedClip(video, anchor);
        if (verdict.verdict === 'accepted') {
          await this.d.storage.put(mp4Key, video, { contentType: 'video/mp4' });
          uploaded = true;
        }
      }
      const accepted = verdict.verdict === 'accepted';
      const error = verdict.verdict === 'accepted' ? null : verdict.message;
      const old = await sql.begin(async (tx) => {
        const [cur] = await tx<AvatarClipRow[]>`
          select c.* from avatar_clips c join avatars a on a.id = c.avatar_id
          where c.avatar_id = ${data.avatarId} and c.clip_id = ${data.clipId} and c.status = 'rendering' and c.retired_at is null
            and a.deleted_at is null and c.source_kind = 'upload' and c.upload_asset_id = ${assetId}
            and a.anchor_version = ${avatar?.anchor_version ?? 0}
          for update of c for share of a`;
        if (!cur) return undefined;
        await tx`
          update avatar_clips set status = ${accepted ? 'ready' : 'failed'}, pose_check = ${tx.json(verdict as never)}, error = ${error},
            mp4_key = ${accepted ? mp4Key : cur.mp4_key}, cache_key = ${accepted ? null : cur.cache_key},
            generation_id = ${accepted ? generationId : cur.generation_id}, anchor_version = ${avatar?.anchor_version ?? cur.anchor_version}, updated_at = now()
          where avatar_id = ${data.avatarId} and clip_id = ${data.clipId}`;
        if (accepted)
          await enqueueClipCache(tx, this.d.jobs, {
            tenantId: data.tenantId,
            avatarId: data.avatarId,
            clipId: data.clipId,
            generationId,
          });
        return cur;
      });
      if (!old) {
        log.info('clip no longer current before publishing, discarded');
        if (uploaded) await this.deleteKeys([mp4Key]);
        return;
      }
      log.info({ verdict: verdict.verdict }, 'uploaded clip pose-checked');
      if (accepted && old.mp4_key && old.mp4_key !== mp4Key) {
        await this.deleteKeys(renderObjectKeys(old.mp4_key, old.cache_key));
      }
    } catch (err) {
      if (uploaded) await this.deleteKeys([mp4Key]);
      if (job.retryCount >= job.retryLimit) {
        log.warn({ err }, 'clip pose validation failed');
        await sql`
          update avatar_clips set status = 'failed', error = ${`Pose validation failed after ${job.retryCount + 1} attempts`}, updated_at = now()
          where avatar_id = ${data.avatarId} and clip_id = ${data.clipId} and status in ('queued', 'rendering')
            and source_kind = 'upload' and upload_asset_id = ${assetId}`;
        return;
      }
      log.warn({ err }, 'clip pose validation attempt failed, will retry');
      await guard('queued');
      throw err;
    }
  }

  /** The anchor pose of a portrait asset, once per asset in this worker (a refusal is remembered too). */
  private async anchorFor(tenantId: string, portraitAssetId: string): Promise<AnchorPose | { refused: string }> {
    const hit = this.anchors.get(portraitAssetId);
    if (hit) return hit;
    let out: AnchorPose | { refused: string };
    try {
      out = await anchorPose(await this.d.assets.readBytes(tenantId, portraitAssetId));
    } catch (err) {
      if (!isRigError(err)) throw err;
      out = { refused: `${err.code}: ${err.message}` };
    }
    if (this.anchors.size > 1000) this.anchors.clear();
    this.anchors.set(portraitAssetId, out);
    return out;
  }

  /** A job that ran out of attempts without its handler deciding (its last worker died): fail the clip. */
  private async dead(data: ClipJobData): Promise<void> {
    await this.setStatus(data, 'failed', 'Clip generation failed: its worker stopped repeatedly');
  }

  private deleteKeys(keys: string[]): Promise<void> {
    return deleteObjects(this.d.storage, this.d.log, keys);
  }
}
