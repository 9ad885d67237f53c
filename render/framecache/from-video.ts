/**
 * A frame cache (format.ts: JPEG frames, per-frame landmarks, face and mouth boxes) from any video
 * file ffmpeg reads: uploaded clips, scenes, anything a lip-sync has to drive.
 *
 *   const { manifest } = await buildFrameCacheFromVideo('in.mp4', 'out/cache', {
 *     fps: 25, width: 512, height: 512, maxSeconds: 60, kind: 'clip', loop: false,
 *   });
 *
 * Pipeline, streamed (one frame in memory at a time, whatever the video's length):
 *   ffmpeg decodes at `fps` (frames dropped or repeated to the constant rate), scales and writes
 *   PPM frames to a pipe -> the face tracker (render/rig/track.ts: a full detection on the first
 *   frame and whenever the face is lost, otherwise the landmark model on the previous frame's crop)
 *   -> FrameCacheWriter (JPEG, landmarks, boxes; atomic on finish).
 *
 * Picture size, `fit`:
 * - `pad` (default): exactly width x height; the video is scaled to fit inside, aspect kept, and
 *   centred on black bars. Chosen over cropping because a crop can cut off the face or the mouth
 *   (a speaker off-centre in a wide shot), and nothing of the picture is lost. Use it where the
 *   cache must match another's size (an avatar's clips play interchangeably with its loop).
 * - `contain`: width x height is a bounding box; the picture keeps the video's own aspect (no bars),
 *   each side rounded down to even. Use it where the clip is the whole picture (a scene).
 *
 * Frames without a usable face: a frame where the tracker finds no face (or two rival faces) is
 * `missing`: its landmarks are interpolated between the nearest frames with a face on each side
 * (held from the one neighbour at the clip's ends). A frame whose face is too small or turned too
 * far to animate (the rig's limits, `limits`) keeps its measured landmarks but counts as
 * `unusable`. The clip is refused (VideoFrameCacheError) when missing and unusable frames are more
 * than `maxBadFraction` of it, when the face is missing for longer than `maxGapSeconds` at a
 * stretch, or when no frame has a usable face; decoding stops at the first frame that settles it.
 *
 * Bounds: the file is refused over `maxInputBytes` (before decoding), the video over `maxSeconds`
 * (decoding stops one frame past it) or under `minSeconds` (a still image is not a video), the
 * picture over 2048 pixels a side.
 *
 * Cost, measured with `npm run bench -- video-cache` (this project's 2-core VM, one onnxruntime
 * thread, a 10 s 640x360 clip whose face moves, 25 fps, JPEG q90): about 15 ms of wall time per
 * frame for a 512x512 padded cache (ffmpeg decode and scale about 2 ms, face tracking about 7 ms,
 * JPEG encode and write about 6.5 ms) and 11 ms for the 512x288 contained one: 0.3 to 0.4 s per
 * second of video. A full detection (first frame, or after the face was lost) costs about 50 ms
 * instead of the tracked frame's 5 to 7 ms.
 */
import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { resolveFfmpegPath } from '../encode/mp4.ts';
import type { RgbImage } from '../rig/image.ts';
import type { RigLimits } from '../rig/rig.ts';
import { LANDMARK_COUNT } from '../rig/topology.ts';
import { FaceTracker } from '../rig/track.ts';
import type { Point3 } from '../rig/types.ts';
import type { FrameCacheManifest } from './format.ts';
import { FrameCacheWriter } from './writer.ts';

export interface VideoFrameCacheOptions {
  /** Frame rate of the cache: the video is resampled to it (frames dropped or repeated). */
  fps: number;
  /** Picture size (`pad`) or the box the picture fits in (`contain`); even, 16 to 2048. */
  width: number;
  height: number;
  /** Default `pad`; see the file comment. */
  fit?: 'pad' | 'contain';
  /** JPEG quality, default 90. */
  quality?: number;
  /** Longest video accepted, seconds (too_long past it). */
  maxSeconds: number;
  /** Shortest video accepted, seconds; default 0.5 (at least 2 frames). */
  minSeconds?: number;
  /** Largest file accepted, bytes (too_large); default no cap. */
  maxInputBytes?: number;
  kind: FrameCacheManifest['kind'];
  /** Stored in the manifest: the clip's last frame is followed by its first. */
  loop: boolean;
  /** Face size and pose limits of a usable frame; default the rig's (DEFAULT_RIG_LIMITS). */
  limits?: Partial<RigLimits>;
  /** Largest share of frames without a usable face, default 0.2. */
  maxBadFraction?: number;
  /** Longest stretch without a face, seconds, default 1 (landmarks are interpolated across shorter ones). */
  maxGapSeconds?: number;
  /** Added to the manifest's meta. */
  meta?: Record<string, unknown>;
  /** ffmpeg binary; default FFMPEG_PATH, else the @ffmpeg-installer build. */
  ffmpegPath?: string;
  /** Stops decoding (the promise rejects with the signal's reason). */
  signal?: AbortSignal;
}

export type VideoFrameCacheErrorCode =
  | 'invalid_video' // not a video ffmpeg can decode, or no video stream
  | 'too_large' // the file is over maxInputBytes
  | 'too_long' // over maxSeconds
  | 'too_short' // under minSeconds (a still image, a blip)
  | 'face_missing' // no face (or rival faces) in too many frames, or for too long
  | 'face_unusable'; // a face, but too small or too turned in too many frames

/** A video refused as a frame cache: `code` is stable, `message` is for people, `details` for logs. */
export class VideoFrameCacheError extends Error {
  override readonly name = 'VideoFrameCacheError';
  constructor(
    readonly code: VideoFrameCacheErrorCode,
    message: string,
    readonly details: Readonly<Record<string, number | string>> = {},
  ) {
    super(message);
  }
}

interface VideoFrameCacheStats {
  frames: number;
  /** Frames whose face came from a full detection, from tracking, or was interpolated (missing). */
  detected: number;
  tracked: number;
  missing: number;
  /** Frames with a face too small or too turned (kept landmarks). */
  unusable: number;
  /** Full detections run (first frame and after each loss). */
  detections: number;
  /** Milliseconds waiting for decoded frames, in the face tracker, and encoding and writing. */
  decodeMs: number;
  rigMs: number;
  writeMs: number;
  totalMs: number;
}

export interface VideoFrameCacheResult {
  manifest: FrameCacheManifest;
  stats: VideoFrameCacheStats;
}

const FROM_VIDEO_VERSION = 'from-video-v1';
const MAX_SIDE = 2048;

function checkOptions(o: VideoFrameCacheOptions): void {
  const bad = (what: string) => {
    throw new RangeError(`buildFrameCacheFromVideo: ${what}`);
  };
  if (!(o.fps > 0 && o.fps <= 120)) bad(`fps must be in (0, 120], got ${o.fps}`);
  for (const [k, v] of [
    ['width', o.width],
    ['height', o.height],
  ] as const) {
    if (!Number.isInteger(v) || v < 16 || v > MAX_SIDE || v % 2 !== 0)
      bad(`${k} must be an even integer from 16 to ${MAX_SIDE}, got ${v}`);
  }
  if (!(o.maxSeconds > 0)) bad(`maxSeconds must be positive, got ${o.maxSeconds}`);
  const f = o.maxBadFraction ?? 0.2;
  if (!(f >= 0 && f <= 1)) bad(`maxBadFraction must be within 0..1, got ${f}`);
}

/** ffmpeg's -vf: resample, square the pixels, scale into the box (and pad it for `pad`), RGB. */
function filters(o: VideoFrameCacheOptions): string {
  const { fps, width: w, height: h } = o;
  // Fit inside w x h, aspect kept, each side even (expressions, not force_divisible_by: older ffmpeg builds lack it).
  const fitW = `2*trunc(max(2\\,min(${w}\\,iw*${h}/ih))/2)`;
  const fitH = `2*trunc(max(2\\,min(${h}\\,ih*${w}/iw))/2)`;
  const chain = [`fps=${fps}`, 'scale=iw*sar:ih', `scale=w=${fitW}:h=${fitH}`];
  if ((o.fit ?? 'pad') === 'pad') chain.push(`pad=${w}:${h}:(ow-iw)/2:(oh-ih)/2:black`);
  chain.push('setsar=1', 'format=rgb24');
  return chain.join(',');
}

const PPM_HEADER = /^P6\s(\d+)\s(\d+)\s255\s/;
const PPM_HEADER_MAX = 32;

/** The frames of a PPM stream (ffmpeg's image2pipe): RGB, one at a time, read as they are needed. */
async function* ppmFrames(stream: Readable): AsyncGenerator<RgbImage> {
  let chunks: Buffer[] = [];
  let have = 0;
  let frame: { header: number; width: number; height: number } | undefined;
  /** The first n buffered bytes (fewer when fewer are buffered). */
  const peek = (n: number): Buffer => {
    let len = 0;
    let k = 0;
    while (k < chunks.length && len < n) len += chunks[k++]!.length;
    return Buffer.concat(chunks.slice(0, k)).subarray(0, n);
  };
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    have += chunk.length;
    for (;;) {
      if (!frame) {
        const m = PPM_HEADER.exec(peek(PPM_HEADER_MAX).toString('latin1'));
        if (!m) {
          if (have >= PPM_HEADER_MAX) throw new Error('ffmpeg wrote something other than PPM frames');
          break; // the header is still coming
        }
        frame = { header: m[0].length, width: Number(m[1]), height: Number(m[2]) };
      }
      const size = frame.header + frame.width * frame.height * 3;
      if (have < size) break;
      const all = Buffer.concat(chunks, have);
      chunks = have > size ? [all.subarray(size)] : [];
      have -= size;
      // `all` is fresh memory (concat copies), so the frame can be handed out as a view of it.
      yield { width: frame.width, height: frame.height, data: all.subarray(frame.header, size) };
      frame = undefined;
    }
  }
  if (have > 0) throw new Error('ffmpeg stopped in the middle of a frame');
}

function rgbToRgba(rgb: Buffer, out: Uint8Array): Uint8Array {
  for (let i = 0, j = 0; i < rgb.length; i += 3, j += 4) {
    out[j] = rgb[i]!;
    out[j + 1] = rgb[i + 1]!;
    out[j + 2] = rgb[i + 2]!;
    out[j + 3] = 255;
  }
  return out;
}

function lerpLandmarks(a: readonly Point3[], b: readonly Point3[], t: number): Point3[] {
  return a.map((p, i) => {
    const q = b[i]!;
    return { x: p.x + (q.x - p.x) * t, y: p.y + (q.y - p.y) * t, z: p.z + (q.z - p.z) * t };
  });
}

const PLACEHOLDER: Point3[] = Array.from({ length: LANDMARK_COUNT }, () => ({ x: 0, y: 0, z: 0 }));

/**
 * Builds the frame cache of `videoPath` in `outDir` (replaced atomically); see the file comment.
 * @throws VideoFrameCacheError when the video is refused; RangeError for invalid options; other
 *   errors (I/O, ffmpeg missing) as they come.
 */
export async function buildFrameCacheFromVideo(
  videoPath: string,
  outDir: string,
  options: VideoFrameCacheOptions,
): Promise<VideoFrameCacheResult> {
  checkOptions(options);
  options.signal?.throwIfAborted();
  const t0 = performance.now();
  const { fps } = options;
  if (options.maxInputBytes !== undefined) {
    const { size } = await stat(videoPath);
    if (size > options.maxInputBytes) {
      throw new VideoFrameCacheError(
        'too_large',
        `The video file is ${size} bytes, over the cap of ${options.maxInputBytes}`,
        { bytes: size, maxBytes: options.maxInputBytes },
      );
    }
  }
  const maxFrames = Math.max(1, Math.floor(options.maxSeconds * fps));
  const minFrames = Math.max(2, Math.ceil((options.minSeconds ?? 0.5) * fps));
  const maxBadFraction = options.maxBadFraction ?? 0.2;
  const maxGap = Math.max(0, Math.round((options.maxGapSeconds ?? 1) * fps));

  const args = [
    '-v',
    'error',
    '-nostdin',
    '-i',
    videoPath,
    '-map',
    '0:v:0',
    '-an',
    '-sn',
    '-dn',
    '-vf',
    filters(options),
  ];
  args.push('-frames:v', String(maxFrames + 1), '-c:v', 'ppm', '-f', 'image2pipe', 'pipe:1');
  const proc = spawn(options.ffmpegPath ?? resolveFfmpegPath(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (s: string) => (stderr = (stderr + s).slice(-2000)));
  const exited = new Promise<number | null>((resolve, reject) => {
    proc.on('error', reject);
    proc.on('close', (code) => resolve(code));
  });
  exited.catch(() => {});
  const onAbort = () => proc.kill('SIGKILL');
  options.signal?.addEventListener('abort', onAbort, { once: true });

  const tracker = new FaceTracker(options.limits);
  const stats: VideoFrameCacheStats = {
    frames: 0,
    detected: 0,
    tracked: 0,
    missing: 0,
    unusable: 0,
    detections: 0,
    decodeMs: 0,
    rigMs: 0,
    writeMs: 0,
    totalMs: 0,
  };
  const reasons = new Map<string, number>();
  let writer: FrameCacheWriter | undefined;
  let rgba: Uint8Array | undefined;
  let size: { width: number; height: number } | undefined;
  /** The last frame with a face, and the frames since without one (waiting for the next face). */
  let lastFace: { index: number; landmarks: Point3[] } | undefined;
  let gapStart = 0;
  let longestGap = 0;
  let usable = 0;

  const refuseBad = (total: number): VideoFrameCacheError => {
    const bad = stats.missing + stats.unusable;
    const [reason] = [...reasons.entries()].sort((a, b) => b[1] - a[1])[0] ?? ['no_face'];
    const code = stats.missing >= stats.unusable ? 'face_missing' : 'face_unusable';
    const what =
      code === 'face_missing'
        ? 'has no clear face (or more than one)'
        : 'has a face too small or too turned to animate';
    return new VideoFrameCacheError(
      code,
      `The video ${what} in ${bad} of its ${total} frames (at most ${Math.round(maxBadFraction * 100)}% allowed)`,
      {
        badFrames: bad,
        frames: total,
        reason,
      },
    );
  };
  const refuseGap = (gap: number): VideoFrameCacheError =>
    new VideoFrameCacheError(
      'face_missing',
      `The face is missing for more than ${maxGap / fps} s at a stretch (from ${(gapStart / fps).toFixed(2)} s)`,
      {
        gapFrames: gap,
        reason: [...reasons.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? 'no_face',
      },
    );

  try {
    let waitFrom = performance.now();
    for await (const img of ppmFrames(proc.stdout)) {
      stats.decodeMs += performance.now() - waitFrom;
      const i = stats.frames;
      if (i >= maxFrames)
        throw new VideoFrameCacheError('too_long', `The video is longer than ${options.maxSeconds} s`, {
          maxSeconds: options.maxSeconds,
        });
      if (!size) {
        size = { width: img.width, height: img.height };
        rgba = new Uint8Array(img.width * img.height * 4);
        writer = await FrameCacheWriter.create(outDir, {
          kind: options.kind,
          loop: options.loop,
          fps,
          width: img.width,
          height: img.height,
          codec: 'jpeg',
          quality: options.quality ?? 90,
        });
      } else if (img.width !== size.width || img.height !== size.height) {
        throw new VideoFrameCacheError('invalid_video', 'The picture size changes in the middle of the video');
      }

      let t = performance.now();
      const face = await tracker.next(img);
      stats.rigMs += performance.now() - t;

      t = performance.now();
      stats.frames++;
      if (face.face) {
        if (face.via === 'detected') stats.detected++;
        else stats.tracked++;
        if (face.problem) {
          stats.unusable++;
          reasons.set(face.problem.code, (reasons.get(face.problem.code) ?? 0) + 1);
        } else usable++;
        await writer!.addFrame(rgbToRgba(img.data, rgba!), face.landmarks);
        // Fill the frames since the last face: between two faces, or held from this one at the start.
        for (let k = gapStart; k < i; k++) {
          writer!.setLandmarks(
            k,
            lastFace
              ? lerpLandmarks(lastFace.landmarks, face.landmarks, (k - lastFace.index) / (i - lastFace.index))
              : face.landmarks,
          );
        }
        lastFace = { index: i, landmarks: face.landmarks };
        gapStart = i + 1;
      } else {
        stats.missing++;
        reasons.set(face.code, (reasons.get(face.code) ?? 0) + 1);
        await writer!.addFrame(rgbToRgba(img.data, rgba!), PLACEHOLDER);
        longestGap = Math.max(longestGap, i + 1 - gapStart);
        if (longestGap > maxGap) throw refuseGap(longestGap);
      }
      stats.writeMs += performance.now() - t;
      // Settled already: even if every frame left were good, too many are bad.
      if (stats.missing + stats.unusable > maxBadFraction * maxFrames) throw refuseBad(stats.frames);
      waitFrom = performance.now();
    }
    const code = await exited;
    if (code !== 0) {
      const why = stderr.trim().split('\n').pop() ?? '';
      throw new VideoFrameCacheError(
        'invalid_video',
        `The file could not be decoded as a video${why ? ` (${why.slice(0, 200)})` : ''}`,
      );
    }
    if (stats.frames === 0) throw new VideoFrameCacheError('invalid_video', 'The file has no video frames');
    if (stats.frames < minFrames) {
      throw new VideoFrameCacheError(
        'too_short',
        `The video is ${(stats.frames / fps).toFixed(2)} s long; it needs at least ${(minFrames / fps).toFixed(2)} s`,
        {
          frames: stats.frames,
          minFrames,
        },
      );
    }
    if (usable === 0 || stats.missing + stats.unusable > maxBadFraction * stats.frames) throw refuseBad(stats.frames);
    // Trailing frames without a face hold the last one.
    for (let k = gapStart; k < stats.frames; k++) writer!.setLandmarks(k, lastFace!.landmarks);
    stats.detections = tracker.detections;
    // The reader's rig(i) reads these as the detector score and presence of every frame.
    const manifest = await writer!.finish({
      ...options.meta,
      generator: FROM_VIDEO_VERSION,
      detectionScore: tracker.detectionScore,
      presence: 1,
      fit: options.fit ?? 'pad',
      tracking: { detected: stats.detected, tracked: stats.tracked, missing: stats.missing, unusable: stats.unusable },
    });
    writer = undefined;
    stats.totalMs = performance.now() - t0;
    return { manifest, stats };
  } catch (err) {
    if (options.signal?.aborted) throw options.signal.reason ?? err;
    throw err;
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    await exited.catch(() => {});
    await writer?.abort();
  }
}
