/**
 * A frame cache at other settings: frames re-sampled by time to another frame rate (nearest frame,
 * never blended: a blend would ghost), resized (scaled to cover the new size, centred, the overflow
 * cropped), re-encoded at another JPEG quality, and the landmarks moved with the pixels, so the
 * lip-sync geometry of every frame stays exact. A loop stays a loop: it keeps its duration.
 */
import sharp from 'sharp';
import type { Point3 } from '../rig/types.ts';
import type { FrameCacheManifest } from './format.ts';
import { FrameCacheError } from './format.ts';
import type { FrameCache } from './reader.ts';
import { FrameCacheWriter } from './writer.ts';

export interface FrameCacheSettings {
  fps: number;
  width: number;
  height: number;
  /** JPEG quality, 1-100. */
  quality: number;
}

/** The quality a cache written without one has (the writer's default). */
const DEFAULT_QUALITY = 90;

/** What a cache was written at. */
export function settingsOf(m: Pick<FrameCacheManifest, 'fps' | 'width' | 'height' | 'quality'>): FrameCacheSettings {
  return { fps: m.fps, width: m.width, height: m.height, quality: m.quality ?? DEFAULT_QUALITY };
}

/**
 * Settings from overrides of a cache's own: a size given alone keeps the cache's aspect ratio
 * (the other side rounded to an even number of pixels).
 */
export function resolveSettings(
  native: FrameCacheSettings,
  overrides: Partial<FrameCacheSettings>,
): FrameCacheSettings {
  const even = (v: number) => Math.max(2, 2 * Math.round(v / 2));
  let { width, height } = native;
  if (overrides.width !== undefined && overrides.height !== undefined)
    ({ width, height } = overrides as { width: number; height: number });
  else if (overrides.width !== undefined) {
    width = overrides.width;
    height = even((overrides.width * native.height) / native.width);
  } else if (overrides.height !== undefined) {
    height = overrides.height;
    width = even((overrides.height * native.width) / native.height);
  }
  return { fps: overrides.fps ?? native.fps, width, height, quality: overrides.quality ?? native.quality };
}

export function sameSettings(a: FrameCacheSettings, b: FrameCacheSettings): boolean {
  return a.fps === b.fps && a.width === b.width && a.height === b.height && a.quality === b.quality;
}

/** Frames of a cache of `count` frames at `fromFps` re-sampled to `toFps`: the same duration. */
function resampledFrameCount(count: number, fromFps: number, toFps: number): number {
  return Math.max(1, Math.round((count * toFps) / fromFps));
}

/** The source frame shown at frame `j` of the re-sampled cache (the nearest in time). */
export function sourceFrameAt(
  j: number,
  src: { fps: number; frameCount: number; loop: boolean },
  toFps: number,
): number {
  const i = Math.round((j * src.fps) / toFps);
  return src.loop ? i % src.frameCount : Math.min(src.frameCount - 1, i);
}

/** Scale and crop that take a `w0 x h0` frame to cover `w x h` (centred). */
function coverTransform(w0: number, h0: number, w: number, h: number) {
  const scale = Math.max(w / w0, h / h0);
  const rw = Math.max(w, Math.round(w0 * scale));
  const rh = Math.max(h, Math.round(h0 * scale));
  const left = Math.floor((rw - w) / 2);
  const top = Math.floor((rh - h) / 2);
  const sx = rw / w0;
  const sy = rh / h0;
  return {
    resized: { width: rw, height: rh },
    crop: { left, top, width: w, height: h },
    point: (p: Point3): Point3 => ({ x: p.x * sx - left, y: p.y * sy - top, z: p.z * sx }),
  };
}

/** Writes `src` at `settings` into `dstDir` (replaced atomically); returns the new manifest. */
export async function transcodeFrameCache(
  src: FrameCache,
  dstDir: string,
  settings: FrameCacheSettings,
): Promise<FrameCacheManifest> {
  const m = src.manifest;
  const { fps, width, height, quality } = settings;
  if (!Number.isInteger(fps) || fps < 1 || fps > 120) throw new FrameCacheError(`framecache: invalid fps ${fps}`);
  const t = coverTransform(m.width, m.height, width, height);
  const same = t.resized.width === m.width && t.resized.height === m.height && t.crop.left === 0 && t.crop.top === 0;
  const writer = await FrameCacheWriter.create(dstDir, {
    kind: m.kind,
    loop: m.loop,
    fps,
    width,
    height,
    codec: 'jpeg',
    quality,
    meta: { ...m.meta, transcodedFrom: { hash: m.hash, ...settingsOf(m) } },
  });
  try {
    const count = resampledFrameCount(src.frameCount, m.fps, fps);
    for (let j = 0; j < count; j++) {
      const i = sourceFrameAt(j, { fps: m.fps, frameCount: src.frameCount, loop: m.loop }, fps);
      const rgba = await src.frame(i);
      const pixels = same
        ? rgba
        : new Uint8Array(
            await sharp(rgba, { raw: { width: m.width, height: m.height, channels: 4 } })
              .resize(t.resized.width, t.resized.height, { fit: 'fill' })
              .extract(t.crop)
              .raw()
              .toBuffer(),
          );
      const lm = src.landmarks(i);
      const points: Point3[] = [];
      for (let k = 0; k + 2 < lm.length; k += 3) points.push(t.point({ x: lm[k]!, y: lm[k + 1]!, z: lm[k + 2]! }));
      await writer.addFrame(pixels, points);
    }
    return await writer.finish();
  } catch (err) {
    await writer.abort();
    throw err;
  }
}
