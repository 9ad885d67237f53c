import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Sql } from '../platform/db/index.ts';
import type { JobContext, JobQueue } from '../platform/jobs/queue.ts';
import type { Logger } from '../platform/log.ts';
import type { ObjectStorage } from '../platform/storage/index.ts';
import type { UsageStore } from '../usage.ts';
import type { PortraitAssets } from './ports.ts';
import { queueDefaultClips } from './clips.ts';
import type { DefaultClip } from '../../clips/declaration/default-clips.ts';
import { deleteObjects, renderObjectKeys, uploadRender } from './render-outputs.ts';
import { finalRenderFailure, RenderRefused, type RenderProcesses } from './render-process.ts';
import { AVATAR_LOOP_DEAD_JOB, AVATAR_LOOP_JOB, type AvatarRow, type LoopJobData } from './types.ts';

export interface LoopWorkerDeps {
  sql: Sql;
  jobs: JobQueue;
  storage: ObjectStorage;
  assets: PortraitAssets;
  usage: UsageStore;
  log: Logger;
  /** Runs each render in a child process (shared with the clip worker, killed together on stop). */
  renders: RenderProcesses;
  /** Seconds of the generated idle loop. */
  loopSeconds: number;
  /** Concurrent renders in this process. */
  concurrency: number;
  /**
   * The default motion library (DEFAULT_MOTION_CLIPS): queued in the transaction that publishes the
   * loop, when the avatar has no clips yet (core/avatars/clips.ts). None when empty or absent.
   */
  defaultClips?: readonly DefaultClip[];
}

/** Storage key prefix of one generation's outputs: tenants/<t>/avatars/<a>/loops/<generation>. */
export function loopPrefix(d: Pick<LoopJobData, 'tenantId' | 'avatarId' | 'generationId'>): string {
  return `tenants/${d.tenantId}/avatars/${d.avatarId}/loops/${d.generationId}`;
}

/**
 * The worker side of avatar loop generation: registers the job handlers and runs each render in a
 * child process (RenderProcesses). A refusal (RenderRefused) fails the avatar at once.
 */
export class LoopWorker {
  constructor(private readonly d: LoopWorkerDeps) {}

  async start(): Promise<void> {
    await this.d.jobs.work<LoopJobData>(AVATAR_LOOP_JOB, (data, job) => this.run(data, job), {
      concurrency: this.d.concurrency,
    });
    await this.d.jobs.work<LoopJobData>(AVATAR_LOOP_DEAD_JOB, (data) => this.dead(data));
  }

  private async setState(
    data: LoopJobData,
    fields: { idle: AvatarRow['idle_video_status']; error?: string | null; failAvatar?: boolean },
  ): Promise<boolean> {
    const rows = await this.d.sql`
      update avatars set idle_video_status = ${fields.idle},
        error = ${fields.error === undefined ? this.d.sql`error` : fields.error},
        status = ${fields.failAvatar ? this.d.sql`case when serving_loop_key is null then 'failed' else status end` : this.d.sql`status`},
        loop_render_pending = ${fields.idle === 'queued' || fields.idle === 'generating'},
        updated_at = now()
      where id = ${data.avatarId} and generation_id = ${data.generationId} and deleted_at is null
        and idle_video_status in ('queued', 'generating')`;
    return rows.count > 0;
  }

  private async settle(data: LoopJobData, ok: boolean): Promise<void> {
    if (!data.usageSessionId) return;
    await this.d.usage.finish(
      data.usageSessionId,
      ok ? { status: 'released', billableMs: data.priceCreditMicros / 1000 } : { status: 'failed', billableMs: 0 },
    );
  }

  async run(data: LoopJobData, job: JobContext): Promise<void> {
    const log = this.d.log.child({
      job: job.id,
      avatarId: data.avatarId,
      generationId: data.generationId,
      attempt: job.retryCount,
    });
    if (!(await this.setState(data, { idle: 'generating' }))) {
      // Deleted, superseded, or already published by an earlier attempt: nothing to do.
      log.info('loop job no longer current, skipped');
      await this.settle(data, false);
      return;
    }
    if (data.usageSessionId) await this.d.usage.start(data.usageSessionId);
    const work = await mkdtemp(path.join(os.tmpdir(), 'avatar-loop-'));
    const prefix = loopPrefix(data);
    let uploaded: string[] = [];
    try {
      const [row] = await this.d.sql<
        AvatarRow[]
      >`select * from avatars where id = ${data.avatarId} and tenant_id = ${data.tenantId}`;
      if (!row?.source_asset_id) throw new RenderRefused('The avatar has no portrait to animate');
      const portraitPath = path.join(work, 'portrait');
      await writeFile(portraitPath, await this.d.assets.readBytes(data.tenantId, row.source_asset_id));
      const result = await this.d.renders.render({
        portraitPath,
        outDir: path.join(work, 'out'),
        seed: data.avatarId,
        motionPrompt: data.motionPrompt,
        seconds: this.d.loopSeconds,
        reviewed: data.reviewed,
      });
      log.info({ frames: result.frames, renderMs: result.renderMs, totalMs: result.totalMs }, 'loop rendered');

      // Beside the serving loop, under this generation's own prefix; then one conditional swap of keys.
      const { mp4Key: loopKey, cacheKey } = await uploadRender(this.d.storage, prefix, result, 'idle.mp4', uploaded);
      const published = await this.d.sql.begin(async (tx) => {
        const [old] = await tx<AvatarRow[]>`
          select * from avatars where id = ${data.avatarId} and generation_id = ${data.generationId} and deleted_at is null
            and idle_video_status in ('queued', 'generating') for update`;
        if (!old) return undefined;
        await tx`
          update avatars set serving_loop_key = ${loopKey}, serving_cache_key = ${cacheKey},
            cache_manifest_id = ${`cmf_${data.generationId.slice(4)}`}, cache_version = cache_version + 1,
            idle_video_status = 'ready', status = 'ready', error = null, source_kind = 'video',
            motion_prompt = ${data.motionPrompt}, loop_render_pending = false, updated_at = now()
          where id = ${data.avatarId}`;
        // The first published loop also queues the default motion library (once per avatar).
        await queueDefaultClips(
          tx,
          this.d.jobs,
          { tenantId: data.tenantId, avatarId: data.avatarId, reviewed: data.reviewed },
          this.d.defaultClips ?? [],
        );
        return { old };
      });
      if (!published) {
        log.info('loop superseded before publishing, discarded');
        await this.deleteKeys(uploaded);
        await this.settle(data, false);
        return;
      }
      uploaded = [];
      await this.settle(data, true);
      log.info({ loopKey }, 'loop published');
      // The previous loop's objects go once the new keys serve.
      if (published.old.serving_loop_key && published.old.serving_loop_key !== loopKey) {
        await this.deleteKeys(renderObjectKeys(published.old.serving_loop_key, published.old.serving_cache_key));
      }
    } catch (err) {
      await this.deleteKeys(uploaded);
      const failure = finalRenderFailure(err, job, 'Loop');
      if (failure !== undefined) {
        log.warn({ err }, 'loop generation failed');
        await this.setState(data, { idle: 'failed', error: failure, failAvatar: true });
        await this.settle(data, false);
        return; // done: a refusal is not retried
      }
      log.warn({ err }, 'loop generation attempt failed, will retry');
      await this.setState(data, { idle: 'queued' });
      throw err;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /** A job that ran out of attempts without its handler deciding (its last worker died): fail the avatar. */
  private async dead(data: LoopJobData): Promise<void> {
    if (
      await this.setState(data, {
        idle: 'failed',
        error: 'Loop generation failed: its worker stopped repeatedly',
        failAvatar: true,
      })
    ) {
      await this.settle(data, false);
    }
  }

  private deleteKeys(keys: string[]): Promise<void> {
    return deleteObjects(this.d.storage, this.d.log, keys);
  }
}
