/**
 * One frame cache from a video (render/framecache/from-video.ts) as a child process of a job
 * worker, so the per-frame face tracking never blocks the worker's event loop and a crash cannot
 * take the worker down.
 *
 * Input: one JSON argument, VideoCacheRequest. Output: one JSON line on stdout, VideoCacheResult,
 * then exit 0. A refused video is a result (`refused`), not a crash: the caller fails the clip or
 * scene without retry. Anything else exits non-zero and the job is retried.
 */
import { buildFrameCacheFromVideo, VideoFrameCacheError, type VideoFrameCacheOptions, type VideoFrameCacheResult } from '../framecache/from-video.ts';

export interface VideoCacheRequest {
  videoPath: string;
  outDir: string;
  options: Omit<VideoFrameCacheOptions, 'signal'>;
}

export type VideoCacheResult =
  | { ok: true; cacheDir: string; frameCount: number; fps: number; width: number; height: number; stats: VideoFrameCacheResult['stats'] }
  | { ok: false; refused: { code: VideoFrameCacheError['code']; message: string; details: Record<string, number | string> } };

// The parent (the job worker) holds the IPC channel: when it dies, so does this build.
process.on('disconnect', () => process.exit(1));

async function main() {
  const req = JSON.parse(process.argv[2] ?? '') as VideoCacheRequest;
  let result: VideoCacheResult;
  try {
    const { manifest, stats } = await buildFrameCacheFromVideo(req.videoPath, req.outDir, req.options);
    result = { ok: true, cacheDir: req.outDir, frameCount: manifest.frameCount, fps: manifest.fps, width: manifest.width, height: manifest.height, stats };
  } catch (err) {
    if (!(err instanceof VideoFrameCacheError)) throw err;
    result = { ok: false, refused: { code: err.code, message: err.message, details: { ...err.details } } };
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);
