/**
 * The frame caches calls play (an avatar's idle loop and clips, a scene), fetched from object
 * storage once per worker into a local folder, opened once, and shared by every call that plays
 * them. Frames are kept decoded, as I420 (what the WebRTC encoder takes), in a worker-wide memory
 * of bounded size: a loop is decoded on its first pass and then costs nothing to play, however
 * many calls play it. The face geometry the lip-sync needs is computed once per frame and kept.
 */
import { LocalFrameCaches } from '../../core/platform/storage/frame-caches.ts';
import type { ObjectStorage } from '../../core/platform/storage/index.ts';
import { i420Size } from '../../render/encode/index.ts';
import { openFrameCache, type FrameCache, type FrameDecoder } from '../../render/framecache/index.ts';
import type { LipSyncEngine, LipSyncFace } from '../../render/lipsync/index.ts';

/** One playable clip: its frames and, per frame, the prepared face. */
export interface ClipMedia {
  readonly key: string;
  readonly cache: FrameCache;
  readonly frameCount: number;
  readonly width: number;
  readonly height: number;
  /** Frame i as I420 (shared by every call: read it, never write to it). */
  i420(i: number): Promise<Uint8Array>;
  /** The lip-sync geometry of frame i (computed on first use, then kept). */
  face(i: number): LipSyncFace;
}

/** Decoded frames of every clip, the least recently used let go first once `budgetBytes` is passed. */
export class DecodedFrames {
  private readonly frames = new Map<string, { frame: Promise<Uint8Array>; bytes: number }>();
  private bytes = 0;

  constructor(private readonly budgetBytes: number) {}

  get(key: string, bytes: number, decode: () => Promise<Uint8Array>): Promise<Uint8Array> {
    const hit = this.frames.get(key);
    if (hit) {
      this.frames.delete(key);
      this.frames.set(key, hit);
      return hit.frame;
    }
    const frame = decode();
    const entry = { frame, bytes };
    frame.catch(() => this.forget(key, entry));
    this.frames.set(key, entry);
    this.bytes += bytes;
    for (const [k, e] of this.frames) {
      if (this.bytes <= this.budgetBytes || k === key) break;
      this.forget(k, e);
    }
    return frame;
  }

  /** Bytes held now. */
  get size(): number {
    return this.bytes;
  }

  private forget(key: string, entry: { bytes: number }): void {
    if (this.frames.get(key) !== entry) return;
    this.frames.delete(key);
    this.bytes -= entry.bytes;
  }
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
    /** Memory for decoded frames, all clips together. */
    private readonly decoded: DecodedFrames,
    /** Decodes a JPEG-stored frame (a thread of its own on a worker: the event loop stays free). */
    private readonly decoder: FrameDecoder,
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
    // Frames are decoded here, not by the cache (its RGBA memory stays empty).
    const cache = await openFrameCache(local, { lruFrames: 1 });
    const { width, height, codec } = cache.manifest;
    const faces: (LipSyncFace | undefined)[] = new Array(cache.frameCount);
    const bytes = i420Size(width, height);
    return {
      key: cacheKey,
      cache,
      frameCount: cache.frameCount,
      width,
      height,
      // A cache stored as I420 is played straight from its file in memory.
      i420: (i) =>
        codec === 'i420'
          ? Promise.resolve(cache.encoded(i))
          : this.decoded.get(`${cacheKey}#${i}`, bytes, () => this.decoder.jpegToI420(cache.encoded(i), width, height)),
      face: (i) => (faces[i] ??= this.lipsync.prepare(cache.rig(i))),
    };
  }
}
