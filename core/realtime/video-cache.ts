/**
 * POST /realtime/video-cache/plan: the frame caches the realtime paths play, per clip of an avatar
 * (its idle loop `source` and the library clips that have a frame cache), at given settings.
 *
 * Each clip's own cache (the one it was generated with) is an entry at its own settings (`native`).
 * An entry at other settings is a transcode of it (render/framecache/transcode.ts), made by a
 * durable job (`video-cache-transcode`, pg-boss) and stored under
 * `tenants/<t>/avatars/<a>/video-cache/<entry id>/`. Entries live in `video_cache_entries`
 * (migration 0012), so answering is a few reads; a clip whose cache changed (a new loop, a
 * re-rendered or retired clip) has its old entries removed.
 */
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { MANIFEST_FILE, type FrameCacheManifest } from '../../render/framecache/format.ts';
import {
  openFrameCache,
  resolveSettings,
  sameSettings,
  settingsOf,
  transcodeFrameCache,
  type FrameCacheSettings,
} from '../../render/framecache/index.ts';
import type { Principal } from '../auth/key-store.ts';
import { deleteObjects, renderObjectKeys, uploadFrameCache } from '../avatars/render-outputs.ts';
import { loadAvatarPlayback } from '../avatars/playback.ts';
import type { Sql, Tx } from '../platform/db/index.ts';
import { notFound } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import type { JobContext, JobQueue } from '../platform/jobs/queue.ts';
import type { Logger } from '../platform/log.ts';
import type { ObjectStorage } from '../platform/storage/index.ts';
import { fetchFrameCache } from '../platform/storage/frame-caches.ts';

const VIDEO_CACHE_JOB = 'video-cache-transcode';
const VIDEO_CACHE_DEAD_JOB = 'video-cache-transcode-dead';

/** Accepted ranges of the `video_cache` overrides (whole numbers; width and height even). */
export const VIDEO_CACHE_LIMITS = {
  fps: { min: 5, max: 60 },
  width: { min: 64, max: 1024 },
  height: { min: 64, max: 1024 },
  quality: { min: 10, max: 100 },
} as const;

/** The clip id of the idle loop in plans and manifests. */
const LOOP_CLIP_ID = 'source';

type EntryStatus = 'queued' | 'rendering' | 'ready' | 'failed';

interface EntryRow {
  id: string;
  tenant_id: string;
  avatar_id: string;
  clip_id: string;
  source_key: string;
  fps: number;
  width: number;
  height: number;
  quality: number;
  native: boolean;
  status: EntryStatus;
  cache_key: string | null;
  frames: number | null;
  bytes: number | null;
  digest: string | null;
  error: string | null;
}

interface PlanEntry {
  clip_id: string;
  /** `waiting`: the clip has no frame cache yet to make one from (still generating, or an upload awaiting its cache). */
  status: EntryStatus | 'waiting';
  /** The clip's own cache (no transcode needed). */
  native: boolean;
  error: string | null;
}

interface ManifestEntry {
  clip_id: string;
  frames: number;
  fps: number;
  width: number;
  height: number;
  quality: number;
  codec: 'jpeg';
  duration_seconds: number;
  bytes: number;
  digest: string;
}

export interface PlanAnswer {
  status: 'ready' | 'queued';
  plan: { settings: FrameCacheSettings; entries: PlanEntry[]; queued: number };
  manifest: {
    id: string | null;
    avatar_id: string;
    cache_version: number;
    settings: FrameCacheSettings;
    entries: ManifestEntry[];
  };
}

interface VideoCacheJob {
  entryId: string;
}

/** Storage prefix of a transcoded entry. */
function entryPrefix(e: Pick<EntryRow, 'tenant_id' | 'avatar_id' | 'id'>): string {
  return `tenants/${e.tenant_id}/avatars/${e.avatar_id}/video-cache/${e.id}`;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** What a manifest says of its cache: frames, size on disk (frames, landmarks, manifest) and digest. */
function statsOf(m: FrameCacheManifest, manifestBytes: number): { frames: number; bytes: number; digest: string } {
  const last = m.frames[m.frameCount - 1]!;
  return {
    frames: m.frameCount,
    bytes: last[0] + last[1] + m.frameCount * m.landmarkCount * 12 + manifestBytes,
    digest: m.hash,
  };
}

export interface VideoCacheDeps {
  sql: Sql;
  jobs: JobQueue;
  storage: ObjectStorage;
  log: Logger;
}

export class VideoCachePlanner {
  constructor(private readonly d: VideoCacheDeps) {}

  async plan(principal: Principal, avatarId: string, overrides: Partial<FrameCacheSettings>): Promise<PlanAnswer> {
    const { sql } = this.d;
    const playback = await loadAvatarPlayback(sql, principal.tenantId, avatarId);
    if (!playback) throw notFound(`Avatar ${avatarId}`);
    const [avatar] = await sql<
      { cache_manifest_id: string | null }[]
    >`select cache_manifest_id from avatars where id = ${avatarId}`;

    // The clips that have a frame cache to play (and to transcode from), the loop first.
    const sources: { clipId: string; key: string }[] = [];
    const entries: PlanEntry[] = [];
    if (playback.loopCacheKey) sources.push({ clipId: LOOP_CLIP_ID, key: playback.loopCacheKey });
    else entries.push({ clip_id: LOOP_CLIP_ID, status: 'waiting', native: false, error: null });
    for (const c of playback.clips.values()) {
      if (c.cacheKey) sources.push({ clipId: c.clipId, key: c.cacheKey });
      else
        entries.push({
          clip_id: c.clipId,
          status: c.availability === 'failed' ? 'failed' : 'waiting',
          native: false,
          error: null,
        });
    }

    await this.dropStale(principal.tenantId, avatarId, sources);
    const natives = new Map<string, EntryRow>();
    for (const s of sources) {
      const row = await this.nativeEntry(principal.tenantId, avatarId, s.clipId, s.key);
      if ('unreadable' in row)
        entries.push({ clip_id: s.clipId, status: 'failed', native: true, error: row.unreadable });
      else natives.set(s.clipId, row);
    }
    const base = natives.get(LOOP_CLIP_ID) ?? natives.values().next().value;
    const settings = resolveSettings(
      base ? settingsOf(base) : { fps: 25, width: 512, height: 512, quality: 90 },
      overrides,
    );

    let queued = 0;
    const ready: ManifestEntry[] = [];
    for (const s of sources) {
      const native = natives.get(s.clipId);
      if (!native) continue;
      let row: EntryRow;
      if (sameSettings(settingsOf(native), settings)) row = native;
      else {
        const { entry, enqueued } = await this.transcodeEntry(principal.tenantId, avatarId, s.clipId, s.key, settings);
        row = entry;
        if (enqueued) queued++;
      }
      entries.push({ clip_id: s.clipId, status: row.status, native: row.native, error: row.error });
      if (row.status === 'ready') {
        ready.push({
          clip_id: s.clipId,
          frames: row.frames!,
          fps: row.fps,
          width: row.width,
          height: row.height,
          quality: row.quality,
          codec: 'jpeg',
          duration_seconds: row.frames! / row.fps,
          bytes: Number(row.bytes),
          digest: row.digest!,
        });
      }
    }
    const order = (id: string) => (id === LOOP_CLIP_ID ? '' : id);
    entries.sort((a, b) => order(a.clip_id).localeCompare(order(b.clip_id)));
    ready.sort((a, b) => order(a.clip_id).localeCompare(order(b.clip_id)));
    return {
      status: entries.length > 0 && entries.every((e) => e.status === 'ready') ? 'ready' : 'queued',
      plan: { settings, entries, queued },
      manifest: {
        id: avatar?.cache_manifest_id ?? null,
        avatar_id: avatarId,
        cache_version: playback.cacheVersion,
        settings,
        entries: ready,
      },
    };
  }

  /** The clip's own cache as an entry: read from its manifest once, then from the table. */
  private async nativeEntry(
    tenantId: string,
    avatarId: string,
    clipId: string,
    key: string,
  ): Promise<EntryRow | { unreadable: string }> {
    const { sql } = this.d;
    const [found] = await sql<EntryRow[]>`
      select * from video_cache_entries where avatar_id = ${avatarId} and clip_id = ${clipId} and source_key = ${key} and native`;
    if (found) return found;
    let manifest: FrameCacheManifest;
    let size: number;
    try {
      const bytes = await readAll(await this.d.storage.get(`${key}/${MANIFEST_FILE}`));
      manifest = JSON.parse(bytes.toString('utf8')) as FrameCacheManifest;
      size = bytes.length;
    } catch (err) {
      this.d.log.warn({ err, avatarId, clipId }, 'frame cache manifest unreadable');
      return { unreadable: 'The clip’s frame cache could not be read' };
    }
    const s = settingsOf(manifest);
    const st = statsOf(manifest, size);
    const [row] = await sql<EntryRow[]>`
      insert into video_cache_entries (id, tenant_id, avatar_id, clip_id, source_key, fps, width, height, quality, native, status, cache_key, frames, bytes, digest)
      values (${newId('videoCache')}, ${tenantId}, ${avatarId}, ${clipId}, ${key}, ${s.fps}, ${s.width}, ${s.height}, ${s.quality}, true, 'ready', ${key},
              ${st.frames}, ${st.bytes}, ${st.digest})
      on conflict (avatar_id, clip_id, source_key, fps, width, height, quality) do update set updated_at = now()
      returning *`;
    return row!;
  }

  /** The transcode of a clip's cache at `s`: found, or inserted and queued (a failed one is queued again). */
  private async transcodeEntry(
    tenantId: string,
    avatarId: string,
    clipId: string,
    key: string,
    s: FrameCacheSettings,
  ): Promise<{ entry: EntryRow; enqueued: boolean }> {
    return this.d.sql.begin(async (tx: Tx) => {
      const [inserted] = await tx<EntryRow[]>`
        insert into video_cache_entries (id, tenant_id, avatar_id, clip_id, source_key, fps, width, height, quality, status)
        values (${newId('videoCache')}, ${tenantId}, ${avatarId}, ${clipId}, ${key}, ${s.fps}, ${s.width}, ${s.height}, ${s.quality}, 'queued')
        on conflict (avatar_id, clip_id, source_key, fps, width, height, quality) do nothing
        returning *`;
      let entry = inserted;
      if (!entry) {
        // Asked again after it failed: try again (only one caller wins the update).
        [entry] = await tx<EntryRow[]>`
          update video_cache_entries set status = 'queued', error = null, updated_at = now()
          where avatar_id = ${avatarId} and clip_id = ${clipId} and source_key = ${key}
            and fps = ${s.fps} and width = ${s.width} and height = ${s.height} and quality = ${s.quality} and status = 'failed'
          returning *`;
        if (!entry) {
          const [current] = await tx<EntryRow[]>`
            select * from video_cache_entries where avatar_id = ${avatarId} and clip_id = ${clipId} and source_key = ${key}
              and fps = ${s.fps} and width = ${s.width} and height = ${s.height} and quality = ${s.quality}`;
          return { entry: current!, enqueued: false };
        }
      }
      await this.d.jobs.enqueue(
        VIDEO_CACHE_JOB,
        { entryId: entry.id } satisfies VideoCacheJob,
        { singletonKey: entry.id, deadLetter: VIDEO_CACHE_DEAD_JOB },
        tx,
      );
      return { entry, enqueued: true };
    });
  }

  /** Entries made from caches that no longer serve (a new loop, a re-rendered or retired clip) go, with their objects. */
  private async dropStale(
    tenantId: string,
    avatarId: string,
    sources: { clipId: string; key: string }[],
  ): Promise<void> {
    const clipIds = sources.map((s) => s.clipId);
    const keys = sources.map((s) => s.key);
    const gone = await this.d.sql<EntryRow[]>`
      delete from video_cache_entries e
      where e.avatar_id = ${avatarId} and e.tenant_id = ${tenantId}
        and not exists (select 1 from unnest(${clipIds}::text[], ${keys}::text[]) as s(clip_id, source_key)
                        where s.clip_id = e.clip_id and s.source_key = e.source_key)
      returning e.*`;
    const objects = gone.filter((e) => !e.native && e.cache_key).flatMap((e) => renderObjectKeys(null, e.cache_key));
    if (objects.length > 0) await deleteObjects(this.d.storage, this.d.log, objects);
  }
}

/** Makes the transcoded entries (job `video-cache-transcode`). */
export class VideoCacheWorker {
  constructor(private readonly d: VideoCacheDeps & { concurrency: number }) {}

  async start(): Promise<void> {
    await this.d.jobs.work<VideoCacheJob>(VIDEO_CACHE_JOB, (data, job) => this.run(data, job), {
      concurrency: this.d.concurrency,
    });
    await this.d.jobs.work<VideoCacheJob>(VIDEO_CACHE_DEAD_JOB, (data) => this.dead(data));
  }

  async run(data: VideoCacheJob, job: JobContext): Promise<void> {
    const { sql, storage } = this.d;
    const log = this.d.log.child({ job: job.id, entryId: data.entryId, attempt: job.retryCount });
    const [entry] = await sql<EntryRow[]>`
      update video_cache_entries set status = 'rendering', updated_at = now()
      where id = ${data.entryId} and status in ('queued', 'rendering') returning *`;
    if (!entry) {
      log.info('video cache job no longer current, skipped');
      return;
    }
    const work = await mkdtemp(path.join(os.tmpdir(), 'video-cache-'));
    const prefix = entryPrefix(entry);
    let uploaded: string[] = [];
    try {
      const src = path.join(work, 'src');
      const out = path.join(work, 'out');
      await fetchFrameCache(storage, entry.source_key, src);
      const manifest = await transcodeFrameCache(await openFrameCache(src, { lruFrames: 4 }), out, {
        fps: entry.fps,
        width: entry.width,
        height: entry.height,
        quality: entry.quality,
      });
      await uploadFrameCache(storage, prefix, out, uploaded);
      const st = statsOf(manifest, (await readFile(path.join(out, MANIFEST_FILE))).length);
      const published = await sql`
        update video_cache_entries set status = 'ready', cache_key = ${prefix}, frames = ${st.frames}, bytes = ${st.bytes},
          digest = ${st.digest}, error = null, updated_at = now()
        where id = ${entry.id} and status = 'rendering'`;
      if (published.count === 0) {
        log.info('video cache entry dropped while rendering, discarded');
        await deleteObjects(storage, log, uploaded);
        return;
      }
      uploaded = [];
      log.info({ frames: st.frames, bytes: st.bytes }, 'video cache entry ready');
    } catch (err) {
      await deleteObjects(storage, log, uploaded);
      if (job.retryCount >= job.retryLimit) {
        log.warn({ err }, 'video cache entry failed');
        await this.fail(entry.id, `Transcoding failed after ${job.retryCount + 1} attempts`);
        return;
      }
      log.warn({ err }, 'video cache attempt failed, will retry');
      await sql`update video_cache_entries set status = 'queued', updated_at = now() where id = ${entry.id} and status = 'rendering'`;
      throw err;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /** A job whose workers kept dying: the entry fails (asking again queues it again). */
  private async dead(data: VideoCacheJob): Promise<void> {
    await this.fail(data.entryId, 'Transcoding failed: its worker stopped repeatedly');
  }

  private async fail(id: string, error: string): Promise<void> {
    await this.d
      .sql`update video_cache_entries set status = 'failed', error = ${error}, updated_at = now() where id = ${id} and status in ('queued', 'rendering')`;
  }
}
