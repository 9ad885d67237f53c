/**
 * Writes a generated loop or clip in one rendering pass: an H.264 MP4 (with a silent AAC
 * track, through render/encode's writer) and/or a frame cache directory (render/framecache).
 */
import { Mp4Writer } from '../encode/index.ts';
import type { Mp4Result } from '../encode/index.ts';
import { FrameCacheWriter } from '../framecache/index.ts';
import type { FrameCacheManifest, FrameCodec } from '../framecache/index.ts';
import { GenerateError } from './errors.ts';
import type { GeneratedMotion } from './generate.ts';

const GENERATOR_VERSION = 'generate-v1';

export interface WriteMotionOptions {
  /** MP4 output file. */
  mp4Path?: string;
  /** Frame cache output directory (replaced atomically). */
  cacheDir?: string;
  /** Frame cache codec, default "jpeg"; JPEG quality default 90. */
  codec?: FrameCodec;
  quality?: number;
  /** x264 CRF for the MP4, default 20. */
  crf?: number;
}

export interface WriteMotionResult {
  frames: number;
  mp4?: Mp4Result;
  cache?: FrameCacheManifest;
  /** Milliseconds spent rendering frames (the rest is encoding). */
  renderMs: number;
  totalMs: number;
}

const SILENT_AUDIO_RATE = 48_000;

export async function writeMotion(gen: GeneratedMotion, options: WriteMotionOptions): Promise<WriteMotionResult> {
  if (!options.mp4Path && !options.cacheDir)
    throw new GenerateError('invalid_options', 'writeMotion needs mp4Path, cacheDir or both.');
  const t0 = performance.now();
  const mp4 = options.mp4Path
    ? new Mp4Writer({
        path: options.mp4Path,
        width: gen.width,
        height: gen.height,
        fps: gen.fps,
        sampleRate: SILENT_AUDIO_RATE,
        crf: options.crf ?? 20,
        // A silent AAC track fed frame by frame, so players that expect audio are happy and nothing is held in memory.
        audioTrack: 'silent',
      })
    : null;
  let cache: FrameCacheWriter | null = null;
  let renderMs = 0;
  try {
    cache = options.cacheDir
      ? await FrameCacheWriter.create(options.cacheDir, {
          kind: gen.kind,
          loop: gen.loop,
          fps: gen.fps,
          width: gen.width,
          height: gen.height,
          codec: options.codec ?? 'jpeg',
          quality: options.quality ?? 90,
          meta: {
            generator: GENERATOR_VERSION,
            seed: gen.seed,
            motionPrompt: gen.motionPrompt,
            plan: gen.plan,
            blinkPeaks: gen.blinkPeaks,
            unrecognized: gen.unrecognized,
            presence: gen.rig.presence,
            detectionScore: gen.rig.detection.score,
          },
        })
      : null;
    const buf = new Uint8Array(gen.width * gen.height * 4);
    for (let i = 0; i < gen.frameCount; i++) {
      const t = performance.now();
      const f = gen.renderFrame(i, buf);
      renderMs += performance.now() - t;
      // Both consumers copy or encode before resolving, so the buffer can be reused.
      await Promise.all([mp4?.writeVideoFrame(f.rgba), cache?.addFrame(f.rgba, f.landmarks)]);
    }
    const [mp4Result, manifest] = await Promise.all([mp4?.finish(), cache?.finish()]);
    return {
      frames: gen.frameCount,
      ...(mp4Result ? { mp4: mp4Result } : {}),
      ...(manifest ? { cache: manifest } : {}),
      renderMs,
      totalMs: performance.now() - t0,
    };
  } catch (e) {
    await Promise.all([mp4?.abort(), cache?.abort()].map((p) => p?.catch(() => {})));
    throw e;
  }
}
