/**
 * The frame caches calls play (an avatar's idle loop and clips, a scene), fetched from object
 * storage once per worker into a local folder, opened once, and shared by every call that plays
 * them. The face geometry the lip-sync needs is computed once per frame and kept.
 */
import { LocalFrameCaches } from '../../core/storage/frame-caches.ts';
import type { ObjectStorage } from '../../core/storage/index.ts';
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

export class MediaCache {
  private readonly open = new Map<string, Promise<ClipMedia>>();
  private readonly users = new Map<string, number>();
  private readonly local: LocalFrameCaches;

  constructor(
    storage: ObjectStorage,
    /** Local folder for downloaded caches (one subfolder per storage key). */
    dir: string,
    private readonly lipsync: Pick<LipSyncEngine, 'prepare'>,
  ) {
    this.local = new LocalFrameCaches(storage, dir);
  }

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
    const local = await this.local.local(cacheKey);
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
