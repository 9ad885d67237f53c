/** Writes a frame cache directory (see format.ts) frame by frame; atomic on finish. */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm, writeFile } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { encodeJpeg, rgbaToI420 } from '../encode/index.ts';
import { boundingBox } from '../rig/geometry.ts';
import { LIPS_OUTER } from '../rig/topology.ts';
import type { Point3 } from '../rig/types.ts';
import type { FrameCacheManifest, FrameCodec } from './format.ts';
import { packLandmarks } from './landmarks.ts';
import {
  FRAMECACHE_FORMAT,
  FRAMECACHE_VERSION,
  FRAMES_FILE,
  FrameCacheError,
  LANDMARKS_FILE,
  MANIFEST_FILE,
} from './format.ts';

export interface FrameCacheWriterOptions {
  kind: 'idle' | 'clip';
  loop: boolean;
  fps: number;
  width: number;
  height: number;
  /** Default "jpeg". */
  codec?: FrameCodec;
  /** JPEG quality, default 90. */
  quality?: number;
  meta?: Record<string, unknown>;
}

const r1 = (v: number): number => Math.round(v * 10) / 10;

/** [x, y, width, height] to 0.1 px: the manifest's compact box form. */
function boxOf(points: readonly { x: number; y: number }[]): [number, number, number, number] {
  const b = boundingBox(points);
  return [r1(b.x), r1(b.y), r1(b.width), r1(b.height)];
}

export class FrameCacheWriter {
  private offset = 0;
  private readonly frames: [number, number][] = [];
  private readonly faceBoxes: [number, number, number, number][] = [];
  private readonly mouthBoxes: [number, number, number, number][] = [];
  private readonly hash = createHash('sha256');
  private readonly lmChunks: Buffer[] = [];
  private landmarkCount = -1;
  private done = false;

  private constructor(
    readonly dir: string,
    private readonly tmp: string,
    private readonly fh: FileHandle,
    private readonly opts: Required<Omit<FrameCacheWriterOptions, 'meta'>> & { meta: Record<string, unknown> },
  ) {}

  /** Starts writing into a temporary sibling of `dir`; `finish()` moves it into place. */
  static async create(dir: string, options: FrameCacheWriterOptions): Promise<FrameCacheWriter> {
    const { width, height, fps } = options;
    if (!Number.isInteger(width) || !Number.isInteger(height) || width < 2 || height < 2) {
      throw new FrameCacheError(`framecache: invalid size ${width}x${height}`);
    }
    if (!(fps > 0)) throw new FrameCacheError(`framecache: invalid fps ${fps}`);
    const codec = options.codec ?? 'jpeg';
    const quality = options.quality ?? 90;
    if (!Number.isInteger(quality) || quality < 1 || quality > 100)
      throw new FrameCacheError(`framecache: invalid quality ${quality}`);
    await mkdir(dirname(dir), { recursive: true });
    const tmp = `${dir}.partial-${randomBytes(4).toString('hex')}`;
    await mkdir(tmp, { recursive: true });
    const fh = await open(join(tmp, FRAMES_FILE), 'w');
    return new FrameCacheWriter(dir, tmp, fh, { ...options, codec, quality, meta: options.meta ?? {} });
  }

  get frameCount(): number {
    return this.frames.length;
  }

  /** Appends one frame (tightly packed RGBA) and its landmarks. */
  async addFrame(rgba: Uint8Array, landmarks: readonly Point3[]): Promise<void> {
    if (this.done) throw new FrameCacheError('framecache: writer is finished');
    const { width, height, codec, quality } = this.opts;
    if (rgba.length !== width * height * 4)
      throw new FrameCacheError(`framecache: frame of ${rgba.length} bytes, expected ${width * height * 4}`);
    if (this.landmarkCount < 0) this.landmarkCount = landmarks.length;
    if (landmarks.length !== this.landmarkCount)
      throw new FrameCacheError('framecache: landmark count changed between frames');
    const bytes =
      codec === 'jpeg' ? await encodeJpeg(rgba, width, height, { quality }) : rgbaToI420(rgba, width, height);
    await this.fh.write(bytes);
    this.hash.update(bytes);
    this.frames.push([this.offset, bytes.length]);
    this.offset += bytes.length;
    this.placeLandmarks(this.frames.length - 1, landmarks);
  }

  /**
   * Replaces the landmarks of frame `i`, already added (a video's frame whose face was found only
   * later, from its neighbours). Landmarks are written at finish, so nothing on disk moves.
   */
  setLandmarks(i: number, landmarks: readonly Point3[]): void {
    if (this.done) throw new FrameCacheError('framecache: writer is finished');
    if (!Number.isInteger(i) || i < 0 || i >= this.frames.length)
      throw new RangeError(`frame ${i} out of 0..${this.frames.length - 1}`);
    if (landmarks.length !== this.landmarkCount)
      throw new FrameCacheError('framecache: landmark count changed between frames');
    this.placeLandmarks(i, landmarks);
  }

  private placeLandmarks(i: number, landmarks: readonly Point3[]): void {
    const lm = packLandmarks(landmarks);
    this.lmChunks[i] = Buffer.from(lm.buffer, lm.byteOffset, lm.byteLength);
    this.faceBoxes[i] = boxOf(landmarks);
    this.mouthBoxes[i] = landmarks.length >= 468 ? boxOf(LIPS_OUTER.map((j) => landmarks[j]!)) : boxOf(landmarks);
  }

  /**
   * Writes landmarks and manifest, then moves the directory into place (replacing an old one).
   * `meta` is merged over the meta given at create (what was learnt while writing).
   */
  async finish(meta: Record<string, unknown> = {}): Promise<FrameCacheManifest> {
    if (this.done) throw new FrameCacheError('framecache: writer is finished');
    if (this.frames.length === 0) {
      await this.abort();
      throw new FrameCacheError('framecache: no frames were written');
    }
    this.done = true;
    await this.fh.close();
    const lm = Buffer.concat(this.lmChunks);
    if (!littleEndian()) throw new FrameCacheError('framecache: big-endian hosts are not supported');
    this.hash.update(lm);
    await writeFile(join(this.tmp, LANDMARKS_FILE), lm);
    const { codec, quality, kind, loop, fps, width, height } = this.opts;
    const manifest: FrameCacheManifest = {
      format: FRAMECACHE_FORMAT,
      version: FRAMECACHE_VERSION,
      kind,
      loop,
      fps,
      width,
      height,
      frameCount: this.frames.length,
      codec,
      ...(codec === 'jpeg' ? { quality } : {}),
      landmarkCount: this.landmarkCount,
      frames: this.frames,
      faceBoxes: this.faceBoxes,
      mouthBoxes: this.mouthBoxes,
      hash: this.hash.digest('hex'),
      createdAt: new Date().toISOString(),
      meta: { ...this.opts.meta, ...meta },
    };
    await writeFile(join(this.tmp, MANIFEST_FILE), JSON.stringify(manifest));
    await rm(this.dir, { recursive: true, force: true });
    await rename(this.tmp, this.dir);
    return manifest;
  }

  async abort(): Promise<void> {
    this.done = true;
    await this.fh.close().catch(() => {});
    await rm(this.tmp, { recursive: true, force: true });
  }
}

function littleEndian(): boolean {
  return new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
}
