import { createReadStream } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { FRAMES_FILE, LANDMARKS_FILE, MANIFEST_FILE } from '../../render/framecache/format.ts';
import type { Logger } from '../platform/log.ts';
import type { ObjectStorage } from '../platform/storage/index.ts';

/**
 * A rendered loop or clip in object storage: its MP4 and its frame cache, uploaded and deleted as
 * one, for the loop worker, the clip worker, clip review and the frame caches of uploaded clips
 * and scenes alike.
 */

/** Uploads the render's MP4 as `<prefix>/<mp4Name>` and its frame cache under `<prefix>/cache/`, noting each key in `uploaded` as it lands (so a failure can remove what was written). */
export async function uploadRender(
  storage: ObjectStorage,
  prefix: string,
  render: { mp4: string; cacheDir: string },
  mp4Name: string,
  uploaded: string[],
): Promise<{ mp4Key: string; cacheKey: string }> {
  const mp4Key = `${prefix}/${mp4Name}`;
  await storage.put(mp4Key, createReadStream(render.mp4), { contentType: 'video/mp4' });
  uploaded.push(mp4Key);
  const cacheKey = await uploadFrameCache(storage, `${prefix}/cache`, render.cacheDir, uploaded);
  return { mp4Key, cacheKey };
}

/** Uploads a frame cache directory's files under `cacheKey/`, noting each key in `uploaded` as it lands; returns cacheKey. */
export async function uploadFrameCache(
  storage: ObjectStorage,
  cacheKey: string,
  cacheDir: string,
  uploaded: string[],
): Promise<string> {
  for (const f of await readdir(cacheDir)) {
    const key = `${cacheKey}/${f}`;
    await storage.put(key, createReadStream(path.join(cacheDir, f)), {
      contentType: f.endsWith('.json') ? 'application/json' : 'application/octet-stream',
    });
    uploaded.push(key);
  }
  return cacheKey;
}

/** Every object of a published render, from its MP4 key and frame-cache key. */
export function renderObjectKeys(mp4Key: string | null, cacheKey: string | null): string[] {
  return [
    ...(mp4Key ? [mp4Key] : []),
    ...(cacheKey ? [MANIFEST_FILE, FRAMES_FILE, LANDMARKS_FILE].map((f) => `${cacheKey}/${f}`) : []),
  ];
}

/** Deletes objects one by one; a failure is logged and left for later clean-up, never thrown. */
export async function deleteObjects(storage: ObjectStorage, log: Logger | undefined, keys: string[]): Promise<void> {
  for (const key of keys) {
    await storage.delete(key).catch((err: unknown) => log?.warn({ err, key }, 'could not delete a media object'));
  }
}
