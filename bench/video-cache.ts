import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildFrameCacheFromVideo } from '../render/framecache/index.ts';
import { testVideo } from '../render/framecache/test-videos.ts';
import type { BenchModule, BenchReport } from './types.ts';

/**
 * The cost of a frame cache built from a video (render/framecache/from-video.ts): a clip whose face
 * moves, at 512x512 and 25 fps (the avatar and scene settings), per frame and per second of video,
 * split into decoding (ffmpeg), the face tracker and JPEG encoding and writing. One onnxruntime
 * thread, as the job workers run it.
 */
export const videoCache: BenchModule = {
  name: 'video-cache',
  description: 'frame cache from a video: ms per frame (decode, face tracking, JPEG + write), 512x512 at 25 fps',
  async run({ flags }): Promise<BenchReport> {
    const seconds = Number(flags.seconds ?? 10);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-video-cache-'));
    try {
      const input = path.join(dir, 'clip.mp4');
      writeFileSync(input, testVideo({ seconds, width: 640, height: 360 }));
      const runs = [];
      for (const fit of ['pad', 'contain'] as const) {
        const { stats, manifest } = await buildFrameCacheFromVideo(input, path.join(dir, fit), {
          fps: 25,
          width: 512,
          height: 512,
          fit,
          maxSeconds: seconds + 1,
          kind: 'clip',
          loop: false,
        });
        const per = (ms: number) => ms / stats.frames;
        runs.push({
          fit,
          size: `${manifest.width}x${manifest.height}`,
          frames: stats.frames,
          detections: stats.detections,
          msPerFrame: per(stats.totalMs),
          decodeMsPerFrame: per(stats.decodeMs),
          rigMsPerFrame: per(stats.rigMs),
          writeMsPerFrame: per(stats.writeMs),
          secondsPerVideoSecond: stats.totalMs / 1000 / seconds,
        });
      }
      const f = (x: number) => x.toFixed(1);
      const table = runs
        .map(
          (r) =>
            `${r.fit} ${r.size}, ${r.frames} frames (${r.detections} full detection${r.detections === 1 ? '' : 's'}): ${f(r.msPerFrame)} ms/frame ` +
            `(decode ${f(r.decodeMsPerFrame)}, face ${f(r.rigMsPerFrame)}, JPEG + write ${f(r.writeMsPerFrame)}), ${r.secondsPerVideoSecond.toFixed(2)} s per second of video`,
        )
        .join('\n');
      return { results: { runs }, table, failures: [] };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
