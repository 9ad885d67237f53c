/**
 * One frame cache from a video (render/framecache/from-video.ts) as a child process of a job
 * worker, so the per-frame face tracking never blocks the worker's event loop and a crash cannot
 * take the worker down.
 *
 * Input: one JSON argument, VideoCacheRequest. Output: one JSON line on stdout, VideoCacheResult,
 * then exit 0. A refused video is a result (`refused`), not a crash: the caller fails the clip or
 * scene without retry. Anything else exits non-zero and the job is retried.
 */
import { runAsChild } from './child.ts';
import {
  buildFrameCacheFromVideo,
  VideoFrameCacheError,
  type VideoFrameCacheOptions,
  type VideoFrameCacheResult,
} from '../framecache/from-video.ts';

export interface VideoCacheRequest {
  videoPath: string;
  outDir: string;
  options: Omit<VideoFrameCacheOptions, 'signal'>;
}

export type VideoCacheResult =
  | {
      ok: true;
      cacheDir: string;
      frameCount: number;
      fps: number;
      width: number;
      height: number;
      stats: VideoFrameCacheResult['stats'];
    }
  | {
      ok: false;
      refused: { code: VideoFrameCacheError['code']; message: string; details: Record<string, number | string> };
    };

runAsChild(async (req: VideoCacheRequest): Promise<VideoCacheResult> => {
  try {
    const { manifest, stats } = await buildFrameCacheFromVideo(req.videoPath, req.outDir, req.options);
    return {
      ok: true,
      cacheDir: req.outDir,
      frameCount: manifest.frameCount,
      fps: manifest.fps,
      width: manifest.width,
      height: manifest.height,
      stats,
    };
  } catch (err) {
    if (!(err instanceof VideoFrameCacheError)) throw err;
    return { ok: false, refused: { code: err.code, message: err.message, details: { ...err.details } } };
  }
});
