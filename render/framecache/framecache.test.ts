/** Frame cache round trip: manifest, frames (JPEG and I420), landmarks and rigs, LRU, corruption. */
import { mkdtempSync, rmSync, truncateSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateIdleLoop, preparePortrait } from '../generate/generate.ts';
import type { GeneratedMotion } from '../generate/generate.ts';
import { ASTRONAUT, meanAbsDiff } from '../generate/test-helpers.ts';
import { writeMotion } from '../generate/write.ts';
import { FrameCacheError, FrameCacheWriter, openFrameCache } from './index.ts';

const tmp = mkdtempSync(join(tmpdir(), 'framecache-test-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const S = 256;
let idle: GeneratedMotion;
beforeAll(async () => {
  const p = await preparePortrait(ASTRONAUT, { width: S });
  idle = await generateIdleLoop(p, { seconds: 2, fps: 25, seed: 3 });
}, 60_000);

describe('frame cache', () => {
  it('round-trips a loop as JPEG: manifest, frames close to the originals, exact landmarks', async () => {
    const dir = join(tmp, 'idle');
    const r = await writeMotion(idle, { cacheDir: dir, quality: 90 });
    const m = r.cache!;
    expect(m).toMatchObject({
      kind: 'idle',
      loop: true,
      fps: 25,
      width: S,
      height: S,
      frameCount: 50,
      codec: 'jpeg',
      quality: 90,
      landmarkCount: 468,
    });
    expect(m.hash).toMatch(/^[0-9a-f]{64}$/);
    const cache = await openFrameCache(dir, { verify: true, lruFrames: 4 });
    expect(cache.manifest).toEqual(m);
    for (const i of [0, 13, 49]) {
      const want = idle.renderFrame(i);
      const got = await cache.frame(i);
      expect(got.length).toBe(S * S * 4);
      expect(meanAbsDiff(got, want.rgba)).toBeLessThan(2.5); // JPEG q90
      const lm = cache.landmarks(i);
      expect(lm[1 * 3]).toBeCloseTo(want.landmarks[1]!.x, 3);
      expect(lm[1 * 3 + 1]).toBeCloseTo(want.landmarks[1]!.y, 3);
      const rig = cache.rig(i);
      expect(rig.lips.outer).toHaveLength(20);
      expect(rig.imageSize).toEqual({ width: S, height: S });
      const [x, y, w, h] = m.mouthBoxes[i]!;
      for (const q of rig.lips.outer) {
        expect(q.x).toBeGreaterThanOrEqual(x - 0.1);
        expect(q.y).toBeLessThanOrEqual(y + h + 0.1);
        expect(q.x).toBeLessThanOrEqual(x + w + 0.1);
      }
    }
    // LRU: a repeated frame is served from memory, the cap holds.
    await cache.frame(13);
    expect(cache.stats().hits).toBe(1);
    for (let i = 0; i < 10; i++) await cache.frame(i);
    const before = cache.stats().decoded;
    await cache.frame(0); // evicted by now (cap 4)
    expect(cache.stats().decoded).toBe(before + 1);
    expect(() => cache.landmarks(50)).toThrow(RangeError);
  });

  it('stores raw I420 when asked (no JPEG decode on playback)', async () => {
    const dir = join(tmp, 'i420');
    await writeMotion(idle, { cacheDir: dir, codec: 'i420' });
    const cache = await openFrameCache(dir);
    expect(cache.manifest.codec).toBe('i420');
    expect(cache.encoded(0).length).toBe(S * S * 1.5);
    expect(meanAbsDiff(await cache.frame(7), idle.renderFrame(7).rgba)).toBeLessThan(2);
  });

  it('refuses damaged caches and replaces an old one atomically', async () => {
    const dir = join(tmp, 'damaged');
    await writeMotion(idle, { cacheDir: dir });
    writeFileSync(join(dir, 'landmarks.f32'), readFileSync(join(dir, 'landmarks.f32')).fill(0, 0, 12));
    await expect(openFrameCache(dir, { verify: true })).rejects.toThrow(/hash mismatch/);
    truncateSync(join(dir, 'frames.bin'), 100);
    await expect(openFrameCache(dir)).rejects.toThrow(FrameCacheError);
    await expect(openFrameCache(join(tmp, 'missing'))).rejects.toThrow(/cannot read/);
    await writeMotion(idle, { cacheDir: dir }); // rewrite over the damaged one
    await expect(openFrameCache(dir, { verify: true })).resolves.toBeTruthy();
    const w = await FrameCacheWriter.create(join(tmp, 'empty'), {
      kind: 'clip',
      loop: false,
      fps: 25,
      width: 4,
      height: 4,
    });
    await expect(w.finish()).rejects.toThrow(/no frames/);
  });
});
