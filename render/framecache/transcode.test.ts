/** Frame caches at other settings: frames by time, size, quality and landmarks, against the source cache. */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateIdleLoop, preparePortrait } from '../generate/generate.ts';
import { ASTRONAUT, meanAbsDiff } from '../generate/test-helpers.ts';
import { writeMotion } from '../generate/write.ts';
import {
  openFrameCache,
  resolveSettings,
  settingsOf,
  sourceFrameAt,
  transcodeFrameCache,
  type FrameCache,
} from './index.ts';

const tmp = mkdtempSync(join(tmpdir(), 'framecache-transcode-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let src: FrameCache;

beforeAll(async () => {
  const idle = await generateIdleLoop(await preparePortrait(ASTRONAUT, { width: 256 }), {
    seconds: 2,
    fps: 25,
    seed: 11,
  });
  await writeMotion(idle, { cacheDir: join(tmp, 'src'), quality: 90 });
  src = await openFrameCache(join(tmp, 'src'), { lruFrames: 64 });
}, 60_000);

/** The source frame `i` resized as a reference (sharp, the same filter). */
async function resized(i: number, w: number, h: number): Promise<Uint8Array> {
  const rgba = await src.frame(i);
  return new Uint8Array(
    await sharp(rgba, { raw: { width: 256, height: 256, channels: 4 } })
      .resize(w, h, { fit: 'cover' })
      .raw()
      .toBuffer(),
  );
}

const size = (dir: string) => statSync(join(dir, 'frames.bin')).size;

describe('transcodeFrameCache', () => {
  it('re-samples a loop by time to a lower fps, smaller and at a lower quality, landmarks scaled with the pixels', async () => {
    const dir = join(tmp, 'small');
    const m = await transcodeFrameCache(src, dir, { fps: 10, width: 128, height: 128, quality: 60 });
    expect(m).toMatchObject({
      kind: 'idle',
      loop: true,
      fps: 10,
      width: 128,
      height: 128,
      frameCount: 20,
      codec: 'jpeg',
      quality: 60,
      landmarkCount: src.manifest.landmarkCount,
    });
    expect(m.meta.transcodedFrom).toEqual({ hash: src.manifest.hash, fps: 25, width: 256, height: 256, quality: 90 });
    const out = await openFrameCache(dir, { verify: true });
    expect(size(dir)).toBeLessThan(size(join(tmp, 'src')) / 4);
    for (const j of [0, 3, 7, 19]) {
      const i = Math.round(j * 2.5) % 50;
      expect(sourceFrameAt(j, { fps: 25, frameCount: 50, loop: true }, 10)).toBe(i);
      const got = await out.frame(j);
      const same = meanAbsDiff(got, await resized(i, 128, 128));
      const other = meanAbsDiff(got, await resized((i + 25) % 50, 128, 128));
      // Quality 60 at half size: about 4 from the reference; half a loop away is about twice that.
      expect(same, `frame ${j} is source frame ${i}`).toBeLessThan(5.5);
      expect(other).toBeGreaterThan(1.5 * same);
      const a = src.landmarks(i);
      const b = out.landmarks(j);
      for (const k of [0, 13 * 3, 152 * 3]) {
        expect(b[k]).toBeCloseTo(a[k]! / 2, 4);
        expect(b[k + 1]).toBeCloseTo(a[k + 1]! / 2, 4);
      }
      // The rig recomputed from the moved landmarks: the mouth box follows.
      const [x0, y0, w0] = src.manifest.mouthBoxes[i]!;
      const [x1, y1, w1] = m.mouthBoxes[j]!;
      expect(x1).toBeCloseTo(x0 / 2, 0);
      expect(y1).toBeCloseTo(y0 / 2, 0);
      expect(w1).toBeCloseTo(w0 / 2, 0);
    }
  }, 60_000);

  it('re-samples to a higher fps by repeating the nearest frame, keeping the duration', async () => {
    const dir = join(tmp, 'fast');
    const m = await transcodeFrameCache(src, dir, { fps: 50, width: 256, height: 256, quality: 90 });
    expect(m.frameCount).toBe(100);
    const out = await openFrameCache(dir);
    for (const j of [0, 1, 2, 51, 99]) {
      const i = Math.round(j / 2) % 50;
      expect(meanAbsDiff(await out.frame(j), await src.frame(i)), `frame ${j} is source frame ${i}`).toBeLessThan(2);
      expect(out.landmarks(j)[3]).toBeCloseTo(src.landmarks(i)[3]!, 4);
    }
  }, 60_000);

  it('covers another aspect ratio: scaled to cover, centred, the landmarks moved with the crop', async () => {
    const dir = join(tmp, 'wide');
    const m = await transcodeFrameCache(src, dir, { fps: 25, width: 256, height: 128, quality: 85 });
    expect(m).toMatchObject({ width: 256, height: 128, frameCount: 50 });
    const out = await openFrameCache(dir);
    const want = new Uint8Array(
      await sharp(await src.frame(5), { raw: { width: 256, height: 256, channels: 4 } })
        .extract({ left: 0, top: 64, width: 256, height: 128 })
        .raw()
        .toBuffer(),
    );
    expect(meanAbsDiff(await out.frame(5), want)).toBeLessThan(2.5);
    expect(out.landmarks(5)[1]).toBeCloseTo(src.landmarks(5)[1]! - 64, 4);
    expect(out.landmarks(5)[0]).toBeCloseTo(src.landmarks(5)[0]!, 4);
  }, 60_000);

  it('resolves overrides against the cache’s own settings (one side alone keeps the aspect ratio)', () => {
    const native = settingsOf(src.manifest);
    expect(native).toEqual({ fps: 25, width: 256, height: 256, quality: 90 });
    expect(resolveSettings(native, {})).toEqual(native);
    expect(resolveSettings(native, { width: 128 })).toEqual({ fps: 25, width: 128, height: 128, quality: 90 });
    expect(resolveSettings({ ...native, height: 144 }, { height: 100 })).toEqual({
      fps: 25,
      width: 178,
      height: 100,
      quality: 90,
    });
    expect(resolveSettings(native, { fps: 12, quality: 50 })).toEqual({
      fps: 12,
      width: 256,
      height: 256,
      quality: 50,
    });
  });
});
