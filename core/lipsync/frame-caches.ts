import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { FRAMES_FILE, LANDMARKS_FILE, MANIFEST_FILE } from '../../render/framecache/format.ts';
import type { ObjectStorage } from '../storage/index.ts';

const CACHE_FILES = [MANIFEST_FILE, FRAMES_FILE, LANDMARKS_FILE];

/**
 * Local copies of stored frame caches (an avatar's idle loop), for renderers that read them from
 * disk. A cache's storage key names one generation and its objects never change, so a copy made
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
    const tmp = `${folder}.tmp-${process.pid}-${Date.now()}`;
    await mkdir(tmp, { recursive: true });
    try {
      for (const f of CACHE_FILES) await pipeline(await this.storage.get(`${cacheKey}/${f}`), createWriteStream(path.join(tmp, f)));
      await rm(folder, { recursive: true, force: true });
      await rename(tmp, folder);
      return folder;
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      throw err;
    }
  }
}
