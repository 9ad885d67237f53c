import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { FRAMES_FILE, LANDMARKS_FILE, MANIFEST_FILE } from '../../../render/framecache/format.ts';
import type { ObjectStorage } from './types.ts';

/** The files of a stored frame cache, under its key. */
const CACHE_FILES = [MANIFEST_FILE, FRAMES_FILE, LANDMARKS_FILE] as const;

/**
 * Fetches the frame cache stored under `cacheKey` into `dir` (replaced), through a temporary
 * sibling renamed at the end: a half-fetched cache is never opened.
 */
export async function fetchFrameCache(storage: ObjectStorage, cacheKey: string, dir: string): Promise<void> {
  const tmp = `${dir}.tmp-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  await mkdir(tmp, { recursive: true });
  try {
    for (const f of CACHE_FILES)
      await pipeline(await storage.get(`${cacheKey}/${f}`), createWriteStream(path.join(tmp, f)));
    await rm(dir, { recursive: true, force: true });
    await rename(tmp, dir);
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Local copies of stored frame caches (loops, clips, scenes), for the renderers that read them from
 * disk: lipsync renders, turns and the agent worker's calls. A cache's storage key names one generation and its objects never change, so a copy made
 * once stays good; it is downloaded into a temporary sibling and renamed, so a half-downloaded
 * cache is never opened, and concurrent requests for one key share one download.
 */
export class LocalFrameCaches {
  private readonly pending = new Map<string, Promise<string>>();

  constructor(
    private readonly storage: ObjectStorage,
    /** The folder holding one subfolder per cache. */
    private readonly dir: string,
  ) {}

  /** The local folder of the cache stored under `cacheKey` (manifest.json, frames.bin, landmarks.f32). */
  async local(cacheKey: string): Promise<string> {
    const folder = path.join(this.dir, createHash('sha256').update(cacheKey).digest('hex').slice(0, 32));
    if (await stat(path.join(folder, MANIFEST_FILE)).catch(() => undefined)) return folder;
    let p = this.pending.get(folder);
    if (!p) {
      p = this.download(cacheKey, folder).finally(() => this.pending.delete(folder));
      this.pending.set(folder, p);
    }
    return p;
  }

  private async download(cacheKey: string, folder: string): Promise<string> {
    await fetchFrameCache(this.storage, cacheKey, folder);
    return folder;
  }
}
