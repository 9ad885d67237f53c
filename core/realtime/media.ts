/**
 * The realtime renderer's media in this process: the lip-sync engine (one, shared by every turn)
 * and the avatars' frame caches, fetched from object storage into a local folder, opened once,
 * with the lip-sync geometry of every frame computed once, and shared by every turn that plays
 * them. Bounded: at most `capacity` caches stay open; past it the least recently used one that no
 * turn is playing is closed and its local files removed.
 */
import { createHash } from 'node:crypto';
import { rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { MANIFEST_FILE } from '../../render/framecache/format.ts';
import { openFrameCache } from '../../render/framecache/index.ts';
import { createLipSync, type LipSyncEngine } from '../../render/lipsync/index.ts';
import { frameCacheBody, type FrameCacheBody } from '../../render/turn/index.ts';
import { ApiError } from '../platform/errors.ts';
import type { Logger } from '../platform/log.ts';
import { fetchFrameCache } from '../platform/storage/frame-caches.ts';
import type { ObjectStorage } from '../platform/storage/index.ts';

/** Decoded frames each open cache keeps (RGBA, width x height x 4 bytes each). */
const DECODED_FRAMES = 8;

export interface HeldMedia {
  body: FrameCacheBody;
  /** True when this call loaded it; false when it was open already. */
  loaded: boolean;
  /** What loading cost (zero when it was open already), milliseconds. */
  timings: { fetch_ms: number; open_ms: number; faces_ms: number };
  /** The caller is done with it (it may then be closed to make room). */
  release(): void;
}

interface Entry {
  key: string;
  dir: string;
  users: number;
  ready: Promise<{ body: FrameCacheBody; timings: HeldMedia['timings'] }>;
}

export interface RealtimeMediaOptions {
  storage: ObjectStorage;
  /** Local folder for fetched caches (one subfolder per cache). */
  dir: string;
  /** Caches held open at most (more while all of them are playing). */
  capacity: number;
  /** LIPSYNC_MODEL: `builtin` or the path of a neural model. */
  lipsyncModel: string;
  device: 'cpu' | 'cuda';
  log: Logger;
}

export class RealtimeMedia {
  /** In least recently used order. */
  private readonly entries = new Map<string, Entry>();
  private engine: Promise<LipSyncEngine> | undefined;

  constructor(private readonly o: RealtimeMediaOptions) {}

  /** The lip-sync engine of this process, loaded on first use. */
  lipsync(): Promise<LipSyncEngine> {
    this.engine ??= createLipSync(this.o.lipsyncModel, { executionProvider: this.o.device }).catch((err: unknown) => {
      this.engine = undefined;
      throw err;
    });
    return this.engine;
  }

  /** Names the engine: `builtin:cpu`, `neural:cuda`... */
  async backendId(): Promise<string> {
    return `${(await this.lipsync()).kind}:${this.o.device}`;
  }

  /** Caches open now. */
  get size(): number {
    return this.entries.size;
  }

  isOpen(cacheKey: string): boolean {
    return this.entries.has(cacheKey);
  }

  /**
   * The frame cache stored under `cacheKey`, loaded on first use, ready to play (every frame's
   * geometry computed). Pair with `release()`. A cache that cannot be fetched or read is 502
   * media_unavailable.
   */
  async acquire(cacheKey: string): Promise<HeldMedia> {
    let entry = this.entries.get(cacheKey);
    const loaded = !entry;
    if (entry)
      this.entries.delete(cacheKey); // re-inserted below: now the most recent
    else {
      const dir = path.join(this.o.dir, createHash('sha256').update(cacheKey).digest('hex').slice(0, 32));
      entry = { key: cacheKey, dir, users: 0, ready: this.load(cacheKey, dir) };
      const failed = entry;
      entry.ready.catch(() => {
        if (this.entries.get(cacheKey) === failed) this.entries.delete(cacheKey);
      });
    }
    this.entries.set(cacheKey, entry);
    entry.users++;
    const held = entry;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      held.users--;
      this.evict();
    };
    try {
      const { body, timings } = await entry.ready;
      this.evict();
      return { body, loaded, timings: loaded ? timings : { fetch_ms: 0, open_ms: 0, faces_ms: 0 }, release };
    } catch (err) {
      release();
      this.o.log.warn({ err, cacheKey }, 'realtime media could not be loaded');
      throw new ApiError(
        'media_unavailable',
        "The avatar's media could not be loaded: retry, and quote the requestId if it persists",
      );
    }
  }

  /** Closes every cache no turn is playing. */
  async close(): Promise<void> {
    for (const e of [...this.entries.values()]) if (e.users === 0) this.drop(e);
    const engine = this.engine;
    this.engine = undefined;
    await (await engine?.catch(() => undefined))?.release();
  }

  private evict(): void {
    for (const e of this.entries.values()) {
      if (this.entries.size <= this.o.capacity) return;
      if (e.users === 0) this.drop(e);
    }
  }

  private drop(e: Entry): void {
    this.entries.delete(e.key);
    // Its files go too (the disk stays bounded like the memory); a later acquire fetches again.
    void e.ready.finally(() => rm(e.dir, { recursive: true, force: true })).catch(() => undefined);
  }

  private async load(cacheKey: string, dir: string): Promise<{ body: FrameCacheBody; timings: HeldMedia['timings'] }> {
    const engine = await this.lipsync();
    const t0 = performance.now();
    if (!(await stat(path.join(dir, MANIFEST_FILE)).catch(() => undefined)))
      await fetchFrameCache(this.o.storage, cacheKey, dir);
    const t1 = performance.now();
    const cache = await openFrameCache(dir, { lruFrames: DECODED_FRAMES });
    const body = frameCacheBody(cache, engine);
    const t2 = performance.now();
    body.prepareFaces();
    const t3 = performance.now();
    const ms = (a: number, b: number) => Math.round((b - a) * 10) / 10;
    return { body, timings: { fetch_ms: ms(t0, t1), open_ms: ms(t1, t2), faces_ms: ms(t2, t3) } };
  }
}
