/**
 * The frame caches calls play (an avatar's idle loop and clips, a scene), fetched from object
 * storage once per worker into a local folder, opened once, and shared by every call that plays
 * them. The face geometry the lip-sync needs is computed once per frame and kept.
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { ObjectStorage } from '../../core/storage/index.ts';
import { FRAMES_FILE, LANDMARKS_FILE, MANIFEST_FILE } from '../../render/framecache/format.ts';
import { openFrameCache, type FrameCache } from '../../render/framecache/index.ts';
import type { LipSyncEngine, LipSyncFace } from '../../render/lipsync/index.ts';

/** One playable clip: its frames and, per frame, the prepared face. */
export interface ClipMedia {
  readonly key: string;
  readonly cache: FrameCache;
  readonly frameCount: number;
  readonly width: number;
  readonly height: number;
  /** The lip-sync geometry of frame i (computed on first use, then kept). */
  face(i: number): LipSyncFace;
}

const CACHE_FILES = [MANIFEST_FILE, FRAMES_FILE, LANDMARKS_FILE];

export class MediaCache {
  private readonly open = new Map<string, Promise<ClipMedia>>();
  private readonly users = new Map<string, number>();

  constructor(
    private readonly storage: ObjectStorage,
    /** Local folder for downloaded caches (one subfolder per storage key). */
    private readonly dir: string,
    private readonly lipsync: Pick<LipSyncEngine, 'prepare'>,
  ) {}

  /** The clip stored under `cacheKey`, downloaded and opened on first use. Pair with `release`. */
  acquire(cacheKey: string): Promise<ClipMedia> {
    this.users.set(cacheKey, (this.users.get(cacheKey) ?? 0) + 1);
    let media = this.open.get(cacheKey);
    if (!media) {
      media = this.load(cacheKey);
      media.catch(() => this.open.delete(cacheKey));
      this.open.set(cacheKey, media);
    }
    return media;
  }

  /** A call is done with the clip; the last user lets it go from memory (the local files stay for next time). */
  release(cacheKey: string): void {
    const n = (this.users.get(cacheKey) ?? 1) - 1;
    if (n > 0) {
      this.users.set(cacheKey, n);
      return;
    }
    this.users.delete(cacheKey);
    this.open.delete(cacheKey);
  }

  /** Clips held in memory now. */
  get size(): number {
    return this.open.size;
  }

  private async load(cacheKey: string): Promise<ClipMedia> {
    const local = path.join(this.dir, createHash('sha256').update(cacheKey).digest('hex').slice(0, 32));
    if (!(await stat(path.join(local, MANIFEST_FILE)).catch(() => undefined))) {
      // Into a temporary sibling, then renamed: a half-downloaded cache is never opened.
      const tmp = `${local}.tmp-${process.pid}-${Date.now()}`;
      await mkdir(tmp, { recursive: true });
      try {
        for (const f of CACHE_FILES) await pipeline(await this.storage.get(`${cacheKey}/${f}`), createWriteStream(path.join(tmp, f)));
        await rm(local, { recursive: true, force: true });
        await rename(tmp, local);
      } catch (err) {
        await rm(tmp, { recursive: true, force: true });
        throw err;
      }
    }
    const cache = await openFrameCache(local, { lruFrames: 16 });
    const faces: (LipSyncFace | undefined)[] = new Array(cache.frameCount);
    return {
      key: cacheKey,
      cache,
      frameCount: cache.frameCount,
      width: cache.manifest.width,
      height: cache.manifest.height,
      face: (i) => (faces[i] ??= this.lipsync.prepare(cache.rig(i))),
    };
  }
}
