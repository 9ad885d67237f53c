/** The renderer's media cache: real storage (the local store), real frame caches, the built-in engine. */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../platform/config.ts';
import { ApiError } from '../platform/errors.ts';
import { createLogger } from '../platform/log.ts';
import { createStorage } from '../platform/storage/index.ts';
import { storeTestCache } from '../../test/realtime.ts';
import { RealtimeMedia } from './media.ts';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'realtime-media-test-'));
const storage = createStorage(loadConfig({ DATA_DIR: tmp }));
const dir = path.join(tmp, 'open');
const media = new RealtimeMedia({
  storage,
  dir,
  capacity: 2,
  lipsyncModel: 'builtin',
  device: 'cpu',
  log: createLogger('silent'),
});
afterAll(async () => {
  await media.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('RealtimeMedia', () => {
  it('opens each cache once, shares it, and keeps at most `capacity` open, dropping the least recently used idle one with its files', async () => {
    for (const k of ['a', 'b', 'c']) await storeTestCache(storage, `caches/${k}`);
    const a1 = await media.acquire('caches/a');
    const a2 = await media.acquire('caches/a');
    expect([a1.loaded, a2.loaded]).toEqual([true, false]);
    expect(a2.body).toBe(a1.body);
    expect(a1.timings.faces_ms).toBeGreaterThan(0);
    expect(a2.timings).toEqual({ fetch_ms: 0, open_ms: 0, faces_ms: 0 });
    // Every frame's lip-sync geometry is ready.
    expect(a1.body.face(a1.body.frameCount - 1)).toMatchObject({ kind: 'builtin' });
    const b = await media.acquire('caches/b');
    // All in use: a third one opens beyond the bound rather than dropping a playing one.
    const c = await media.acquire('caches/c');
    expect(media.size).toBe(3);
    a1.release();
    a2.release();
    expect(media.size).toBe(2);
    expect(media.isOpen('caches/a')).toBe(false);
    await new Promise<void>((resolve) => {
      const check = () => (readdirSync(dir).length === 2 ? resolve() : setImmediate(check));
      check();
    });
    b.release();
    c.release();
    // b is now the least recently used: opening a again drops it.
    const again = await media.acquire('caches/a');
    expect(again.loaded).toBe(true);
    expect([media.isOpen('caches/b'), media.isOpen('caches/c'), media.size]).toEqual([false, true, 2]);
    again.release();
    expect(existsSync(dir)).toBe(true);
  }, 60_000);

  it('a cache that is not in storage is 502 media_unavailable, and is not kept', async () => {
    const err = await media.acquire('caches/missing').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ code: 'media_unavailable', status: 502 });
    expect(media.isOpen('caches/missing')).toBe(false);
  });
});
