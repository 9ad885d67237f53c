import type { Sql, Tx } from '../platform/db/index.ts';
import { ApiError } from '../platform/errors.ts';
import { randomBase62 } from '../platform/ids.ts';
import type { JobQueue } from '../platform/jobs/queue.ts';
import type { Logger } from '../platform/log.ts';
import { SafeFetchError, type SafeFetcher } from '../platform/net/safe-fetch.ts';
import type { ObjectStorage } from '../platform/storage/index.ts';
import { sceneCacheObjects } from './builder.ts';
import { isSceneId, sceneIdOf, videoCacheIdOf } from './ids.ts';
import { downloadSource, SceneSourceError, type SourceContent } from './source.ts';
import {
  SCENE_BUILD_DEAD_JOB,
  SCENE_BUILD_JOB,
  toScene,
  UNRESOLVED_SCENE_ID,
  type Scene,
  type SceneBuildJobData,
  type SceneContinuation,
  type SceneProfile,
  type SceneRow,
} from './types.ts';

/** The body of POST /scenes, validated by the route's schema. */
export interface PrepareSceneInput {
  source: { url: string; md5?: string; bytes?: number };
  continuation?: SceneContinuation;
  profile: SceneProfile;
}

/** What POST /scenes answers: 202 while building, 200 once ready or failed. */
export interface PrepareSceneAnswer {
  status: 200 | 202;
  scene: Scene;
}

export interface SceneServiceDeps {
  sql: Sql;
  jobs: JobQueue;
  storage: ObjectStorage;
  log: Logger;
  /** Seconds a scene is kept after its last POST (SCENE_TTL_SECONDS). */
  ttlSeconds: number;
  /** Largest clip downloaded (SCENE_MAX_BYTES). */
  maxBytes: number;
  /** Why the scene builder cannot run on this server now, or undefined when it can (see builder.ts). */
  builderProblem: () => Promise<string | undefined>;
}

const notFound = (id: string) =>
  new ApiError(
    'scene_not_found',
    `Scene ${id.slice(0, 80)} not found: it does not exist in this workspace, or it expired (POST /scenes again to prepare it)`,
  );

/**
 * Scenes over HTTP (docs/scenes.md): POST /scenes prepares a clip (content-addressed id; a durable
 * build job, builder.ts), GET /scenes/{id} reads its state; the expiry sweep drops expired ones.
 */
export class SceneService {
  constructor(private readonly d: SceneServiceDeps) {}

  /**
   * POST /scenes. Checks in order: the workspace switch (403), source.bytes over the cap and the
   * URL's address policy (422 scene_source_rejected), the builder (503); nothing is written on any
   * of these. With md5 and bytes the id is known at once; without, the clip is downloaded here
   * first (a download that fails answers a failed scene with scene_id "unresolved", stored nowhere).
   */
  async prepare(tenantId: string, input: PrepareSceneInput, fetcher: SafeFetcher): Promise<PrepareSceneAnswer> {
    const [tenant] = await this.d.sql<
      { on: boolean }[]
    >`select scene_sessions_enabled as on from tenants where id = ${tenantId}`;
    if (!tenant?.on)
      throw new ApiError(
        'scene_sessions_not_enabled',
        'Scenes are not enabled for this workspace: ask an operator to enable them',
      );
    const { url, md5, bytes } = input.source;
    if (bytes !== undefined && bytes > this.d.maxBytes) {
      throw new ApiError(
        'scene_source_rejected',
        `Invalid field "source.bytes": the clip is over the cap of ${this.d.maxBytes} bytes`,
        { field: 'source.bytes' },
      );
    }
    try {
      await fetcher.checkTarget(url);
    } catch (err) {
      if (!(err instanceof SafeFetchError)) throw err;
      throw new ApiError('scene_source_rejected', `Invalid field "source.url": ${err.message}`, {
        field: 'source.url',
      });
    }
    const problem = await this.d.builderProblem();
    if (problem)
      throw new ApiError(
        'scene_builder_unavailable',
        `The scene builder cannot run: ${problem}. Nothing was written; retry later`,
      );

    const continuation = input.continuation ?? 'loop';
    if (md5 !== undefined && bytes !== undefined) {
      const content = { md5: md5.toLowerCase(), bytes };
      return this.upsert(tenantId, { ...input, continuation }, content, null);
    }
    // The id needs the content: download it now, into storage, for the build to pick up.
    const stagedKey = `tenants/${tenantId}/scenes/sources/${randomBase62(24)}`;
    let content: SourceContent;
    try {
      content = await downloadSource(
        fetcher,
        url,
        { maxBytes: this.d.maxBytes, expected: { md5, bytes } },
        async (body) => {
          await this.d.storage.put(stagedKey, body, { contentType: 'application/octet-stream' });
        },
      );
    } catch (err) {
      await this.d.storage.delete(stagedKey).catch(() => {});
      if (!(err instanceof SceneSourceError)) throw err;
      return { status: 200, scene: unresolved(input.profile, continuation, err) };
    }
    return this.upsert(tenantId, { ...input, continuation }, content, stagedKey);
  }

  /**
   * One row per content: a new scene (or one that failed or expired) is (re)built; one building or
   * ready keeps its build and only takes the continuation and a new expiry. `content`: the md5 and
   * bytes named by the client (the build checks them) or measured here; `stagedKey`: the clip
   * downloaded here, in storage, used by a new build and deleted otherwise.
   */
  private async upsert(
    tenantId: string,
    input: PrepareSceneInput & { continuation: SceneContinuation },
    content: SourceContent,
    stagedKey: string | null,
  ): Promise<PrepareSceneAnswer> {
    const sceneId = sceneIdOf(content.md5, content.bytes);
    // Known from the start (it derives from the id), so a mint can tell a building scene from none;
    // the API shows it once ready.
    const videoCacheId = videoCacheIdOf(sceneId, input.profile);
    const buildId = `bld_${randomBase62(20)}`;
    const leftovers: string[] = [];
    const ttl = this.d.ttlSeconds;
    const row = await this.d.sql.begin(async (tx) => {
      const [inserted] = await tx<SceneRow[]>`
        insert into scenes (tenant_id, id, status, profile, continuation, source_url, source_md5, source_bytes, video_cache_id, build_id, source_key, expires_at)
        values (${tenantId}, ${sceneId}, 'building', ${input.profile}, ${input.continuation}, ${input.source.url},
                ${content.md5}, ${content.bytes}, ${videoCacheId}, ${buildId}, ${stagedKey}, now() + make_interval(secs => ${ttl}))
        on conflict (tenant_id, id) do nothing
        returning *`;
      if (inserted) {
        await this.enqueue(tx, { tenantId, sceneId, buildId });
        return inserted;
      }
      const [cur] = await tx<(SceneRow & { expired: boolean })[]>`
        select *, expires_at <= now() as expired from scenes where tenant_id = ${tenantId} and id = ${sceneId} for update`;
      if (cur!.status === 'failed' || cur!.expired) {
        leftovers.push(...sceneCacheObjects(cur!.cache_key), ...(cur!.source_key ? [cur!.source_key] : []));
        const [rebuilt] = await tx<SceneRow[]>`
          update scenes set status = 'building', error = null, error_message = null, profile = ${input.profile},
            continuation = ${input.continuation}, source_url = ${input.source.url},
            source_md5 = ${content.md5}, source_bytes = ${content.bytes},
            build_id = ${buildId}, source_key = ${stagedKey}, video_cache_id = ${videoCacheId}, cache_key = null,
            frame_count = null, fps = null, width = null, height = null, duration_seconds = null,
            created_at = now(), updated_at = now(), ready_at = null, expires_at = now() + make_interval(secs => ${ttl})
          where tenant_id = ${tenantId} and id = ${sceneId}
          returning *`;
        await this.enqueue(tx, { tenantId, sceneId, buildId });
        return rebuilt!;
      }
      if (stagedKey) leftovers.push(stagedKey);
      const [touched] = await tx<SceneRow[]>`
        update scenes set continuation = ${input.continuation}, updated_at = now(), expires_at = now() + make_interval(secs => ${ttl})
        where tenant_id = ${tenantId} and id = ${sceneId}
        returning *`;
      return touched!;
    });
    for (const key of leftovers)
      await this.d.storage
        .delete(key)
        .catch((err: unknown) => this.d.log.warn({ err, key }, 'could not delete a scene object'));
    return { status: row.status === 'building' ? 202 : 200, scene: toScene(row) };
  }

  private async enqueue(tx: Tx, data: SceneBuildJobData): Promise<void> {
    try {
      await this.d.jobs.enqueue(SCENE_BUILD_JOB, data, { deadLetter: SCENE_BUILD_DEAD_JOB }, tx);
    } catch (err) {
      this.d.log.error({ err }, 'scene build could not be queued');
      throw new ApiError(
        'scene_builder_unavailable',
        'The scene build could not be queued. Nothing was written; retry later',
      );
    }
  }

  /** GET /scenes/{id}: the workspace's scene, while not expired; 404 scene_not_found otherwise. */
  async get(tenantId: string, sceneId: string): Promise<Scene> {
    if (!isSceneId(sceneId)) throw notFound(sceneId);
    const [row] = await this.d.sql<SceneRow[]>`
      select * from scenes where tenant_id = ${tenantId} and id = ${sceneId} and expires_at > now()`;
    if (!row) throw notFound(sceneId);
    return toScene(row);
  }

  /**
   * The expiry sweep: deletes expired scenes (rows, frame caches, staged sources), a batch at a
   * time. A scene POSTed again meanwhile has a new expiry and is kept. Returns how many went.
   */
  async expireDue(batch = 100): Promise<number> {
    let total = 0;
    for (;;) {
      const gone = await this.d.sql<{ cache_key: string | null; source_key: string | null }[]>`
        delete from scenes where (tenant_id, id) in (
          select tenant_id, id from scenes where expires_at <= now() order by expires_at limit ${batch} for update skip locked)
        and expires_at <= now()
        returning cache_key, source_key`;
      for (const g of gone) {
        for (const key of [...sceneCacheObjects(g.cache_key), ...(g.source_key ? [g.source_key] : [])]) {
          await this.d.storage
            .delete(key)
            .catch((err: unknown) => this.d.log.warn({ err, key }, 'could not delete a scene object'));
        }
      }
      total += gone.length;
      if (gone.length < batch) return total;
    }
  }
}

/** The answer for a clip whose download failed before its id was known: stored nowhere. */
function unresolved(profile: SceneProfile, continuation: SceneContinuation, err: SceneSourceError): Scene {
  return {
    sceneId: UNRESOLVED_SCENE_ID,
    status: 'failed',
    profile,
    continuation,
    md5: null,
    bytes: null,
    videoCacheId: null,
    frameCount: null,
    cycleFrameCount: null,
    fps: null,
    width: null,
    height: null,
    durationSeconds: null,
    error: err.error,
    errorMessage: err.message,
    createdAt: null,
    readyAt: null,
    expiresAt: null,
  };
}
