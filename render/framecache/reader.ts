/**
 * Reads a frame cache for realtime playback: the compressed frames and the landmarks are held
 * in memory (a 200-frame 512 px loop is ~6 MB of JPEG), decoded frames in a small LRU, so
 * sessions of one avatar share one open cache.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import { i420ToRgba } from '../encode/index.ts';
import { rigFromLandmarks } from '../rig/assemble.ts';
import type { FaceRig } from '../rig/types.ts';
import type { FrameCacheManifest, FrameCodec } from './format.ts';
import {
  FRAMECACHE_FORMAT,
  FRAMECACHE_VERSION,
  FRAMES_FILE,
  FrameCacheError,
  LANDMARKS_FILE,
  MANIFEST_FILE,
} from './format.ts';
import { unpackLandmarks } from './landmarks.ts';

export interface OpenFrameCacheOptions {
  /** Decoded frames kept (RGBA, width*height*4 bytes each). Default 32. */
  lruFrames?: number;
  /** Check the manifest's sha256 against the files. Default false. */
  verify?: boolean;
}

export interface FrameCache {
  manifest: FrameCacheManifest;
  frameCount: number;
  /** Frame i as tightly packed RGBA (shared with the LRU: do not modify). */
  frame(i: number): Promise<Uint8Array>;
  /** The compressed bytes of frame i (e.g. to pass JPEG through untouched). */
  encoded(i: number): Uint8Array;
  /** Landmarks of frame i: landmarkCount x (x, y, z). */
  landmarks(i: number): Float32Array;
  /** The full face rig of frame i (contours, box, openness, pose), recomputed from its landmarks. */
  rig(i: number): FaceRig;
  /** Decode statistics: frames decoded, cache hits, total decode milliseconds. */
  stats(): { decoded: number; hits: number; decodeMs: number };
}

export async function openFrameCache(dir: string, options: OpenFrameCacheOptions = {}): Promise<FrameCache> {
  let manifest: FrameCacheManifest;
  try {
    manifest = JSON.parse(await readFile(join(dir, MANIFEST_FILE), 'utf8')) as FrameCacheManifest;
  } catch (e) {
    throw new FrameCacheError(`framecache: cannot read ${join(dir, MANIFEST_FILE)}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  if (manifest.format !== FRAMECACHE_FORMAT || manifest.version !== FRAMECACHE_VERSION) {
    throw new FrameCacheError(
      `framecache: unsupported format ${String(manifest.format)} v${String(manifest.version)} in ${dir}`,
    );
  }
  const [frames, lmBuf] = await Promise.all([readFile(join(dir, FRAMES_FILE)), readFile(join(dir, LANDMARKS_FILE))]);
  const { frameCount, landmarkCount, width, height } = manifest;
  if (manifest.frames.length !== frameCount || lmBuf.length !== frameCount * landmarkCount * 12) {
    throw new FrameCacheError(`framecache: ${dir} is truncated or inconsistent`);
  }
  const last = manifest.frames[frameCount - 1]!;
  if (last[0] + last[1] > frames.length) throw new FrameCacheError(`framecache: ${dir}/frames.bin is truncated`);
  if (options.verify) {
    const h = createHash('sha256').update(frames).update(lmBuf).digest('hex');
    if (h !== manifest.hash) throw new FrameCacheError(`framecache: hash mismatch in ${dir}`);
  }
  // Copy into an aligned Float32Array (Buffer slices may be unaligned).
  const lm = new Float32Array(frameCount * landmarkCount * 3);
  new Uint8Array(lm.buffer).set(lmBuf);
  const lru = new Map<number, Promise<Uint8Array>>();
  const cap = Math.max(1, options.lruFrames ?? 32);
  const st = { decoded: 0, hits: 0, decodeMs: 0 };
  const check = (i: number): void => {
    if (!Number.isInteger(i) || i < 0 || i >= frameCount)
      throw new RangeError(`frame ${i} out of 0..${frameCount - 1}`);
  };
  const encoded = (i: number): Uint8Array => {
    check(i);
    const [off, len] = manifest.frames[i]!;
    return frames.subarray(off, off + len);
  };
  const decode = async (i: number): Promise<Uint8Array> => {
    const t0 = performance.now();
    const out = await decodeFrame(encoded(i), manifest.codec, width, height);
    st.decoded++;
    st.decodeMs += performance.now() - t0;
    return out;
  };
  const landmarks = (i: number): Float32Array => {
    check(i);
    const n = landmarkCount * 3;
    return lm.subarray(i * n, (i + 1) * n);
  };
  const rigs = new Map<number, FaceRig>();
  return {
    manifest,
    frameCount,
    encoded,
    landmarks,
    frame(i: number): Promise<Uint8Array> {
      check(i);
      const hit = lru.get(i);
      if (hit) {
        st.hits++;
        lru.delete(i);
        lru.set(i, hit);
        return hit;
      }
      const p = decode(i);
      p.catch(() => lru.delete(i));
      lru.set(i, p);
      while (lru.size > cap) lru.delete(lru.keys().next().value!);
      return p;
    },
    rig(i: number): FaceRig {
      let r = rigs.get(i);
      if (!r) {
        const pts = unpackLandmarks(landmarks(i));
        const [x, y, w, h] = manifest.faceBoxes[i]!;
        // The face box stands in for the detector's box; scores come from the portrait's rig.
        const score = typeof manifest.meta.detectionScore === 'number' ? manifest.meta.detectionScore : 1;
        const presence = typeof manifest.meta.presence === 'number' ? manifest.meta.presence : 1;
        r = rigFromLandmarks(pts, { width, height }, { box: { x, y, width: w, height: h }, score }, presence);
        rigs.set(i, r);
        if (rigs.size > cap) rigs.delete(rigs.keys().next().value!);
      }
      return r;
    },
    stats: () => ({ ...st }),
  };
}

/** One stored frame as tightly packed RGBA (a JPEG decodes on libuv's thread pool). */
export async function decodeFrame(
  bytes: Uint8Array,
  codec: FrameCodec,
  width: number,
  height: number,
): Promise<Uint8Array> {
  if (codec === 'i420') return i420ToRgba(bytes, width, height);
  const buf = await sharp(bytes).ensureAlpha().raw().toBuffer();
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.length);
}
