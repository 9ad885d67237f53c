/** Frame caches from video files, through the real ffmpeg and the real face rig. */
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { detectFaceRig } from '../rig/index.ts';
import {
  buildFrameCacheFromVideo,
  openFrameCache,
  VideoFrameCacheError,
  type VideoFrameCacheOptions,
} from './index.ts';
import { RIG_FIXTURES, testVideo } from './test-videos.ts';

const tmp = mkdtempSync(join(tmpdir(), 'from-video-test-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

let n = 0;
function file(bytes: Buffer, ext = 'mp4'): string {
  const p = join(tmp, `in-${n++}.${ext}`);
  writeFileSync(p, bytes);
  return p;
}
const opts = (o: Partial<VideoFrameCacheOptions> = {}): VideoFrameCacheOptions => ({
  fps: 25,
  width: 512,
  height: 512,
  maxSeconds: 10,
  kind: 'clip',
  loop: false,
  ...o,
});

async function refusal(p: Promise<unknown>): Promise<VideoFrameCacheError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(VideoFrameCacheError);
  return err as VideoFrameCacheError;
}

describe('buildFrameCacheFromVideo', () => {
  it('pads a wide video into the square, tracks the face on every frame, and the landmarks match a fresh detection', async () => {
    const out = join(tmp, 'pad');
    const { manifest, stats } = await buildFrameCacheFromVideo(
      file(testVideo({ seconds: 2 })),
      out,
      opts({ width: 512, height: 512, meta: { source: 'test' } }),
    );
    expect(manifest).toMatchObject({
      kind: 'clip',
      loop: false,
      fps: 25,
      width: 512,
      height: 512,
      frameCount: 50,
      codec: 'jpeg',
      landmarkCount: 468,
    });
    expect(manifest.meta).toMatchObject({ source: 'test', fit: 'pad', tracking: { missing: 0, unusable: 0 } });
    // One full detection, then tracking from frame to frame.
    expect(stats).toMatchObject({ frames: 50, detected: 1, tracked: 49, missing: 0, detections: 1 });
    const cache = await openFrameCache(out, { verify: true });
    // 640x360 into 512x512: a 512x288 picture between black bars of 112 rows each.
    const first = await cache.frame(0);
    expect(first[(10 * 512 + 256) * 4]).toBeLessThan(8);
    expect(first[(256 * 512 + 256) * 4]).toBeGreaterThan(40);
    for (const i of [0, 24, 49]) {
      // The stored frame, rigged from scratch as a still image: its landmarks are where the cache says.
      const png = await sharp(Buffer.from(await cache.frame(i)), { raw: { width: 512, height: 512, channels: 4 } })
        .png()
        .toBuffer();
      const fresh = await detectFaceRig(png);
      const lm = cache.landmarks(i);
      for (const k of [1, 13, 14, 33, 263]) {
        expect(Math.abs(lm[k * 3]! - fresh.landmarks[k]!.x), `frame ${i} point ${k} x`).toBeLessThan(3);
        expect(Math.abs(lm[k * 3 + 1]! - fresh.landmarks[k]!.y), `frame ${i} point ${k} y`).toBeLessThan(3);
      }
      expect(cache.rig(i).lips.outer).toHaveLength(20);
    }
    // The face moves through the clip, and the boxes follow it.
    const xs = manifest.faceBoxes.map((b) => b[0]);
    expect(Math.max(...xs) - Math.min(...xs)).toBeGreaterThan(4);
  });

  it('contain keeps the video aspect (no bars), each side even', async () => {
    const { manifest } = await buildFrameCacheFromVideo(
      file(testVideo({ seconds: 1, width: 480, height: 270 })),
      join(tmp, 'contain'),
      opts({ fit: 'contain', width: 512, height: 512 }),
    );
    expect(manifest).toMatchObject({ width: 512, height: 288, frameCount: 25 });
    expect(manifest.meta.fit).toBe('contain');
  });

  it('resamples to the asked frame rate and reads other containers (VP8 WebM at 10 fps in, 25 fps out)', async () => {
    const { manifest } = await buildFrameCacheFromVideo(
      file(testVideo({ seconds: 2, fps: 10, format: 'webm' }), 'webm'),
      join(tmp, 'webm'),
      opts(),
    );
    expect(manifest.frameCount).toBe(50);
  });

  it('fills a short stretch without a face by interpolating its neighbours', async () => {
    const out = join(tmp, 'gap');
    const { stats } = await buildFrameCacheFromVideo(file(testVideo({ seconds: 2, blackout: [20, 27] })), out, opts());
    expect(stats).toMatchObject({ frames: 50, missing: 8 });
    // A full detection on the first frame, on each frame while the face is lost, and the one that finds it again.
    expect(stats.detections).toBe(1 + 8 + 1);
    const cache = await openFrameCache(out);
    const before = cache.landmarks(19);
    const after = cache.landmarks(28);
    const mid = cache.landmarks(23);
    for (const k of [0, 13 * 3, 13 * 3 + 1, 300 * 3]) {
      const want = before[k]! + ((after[k]! - before[k]!) * (23 - 19)) / (28 - 19);
      expect(mid[k]).toBeCloseTo(want, 2);
    }
    expect(cache.manifest.faceBoxes[23]![2]).toBeGreaterThan(20);
  });

  it('refuses a face missing for longer than maxGapSeconds, leaving nothing behind', async () => {
    const out = join(tmp, 'long-gap');
    const err = await refusal(
      buildFrameCacheFromVideo(file(testVideo({ seconds: 3, blackout: [20, 50] })), out, opts()),
    );
    expect(err.code).toBe('face_missing');
    expect(err.message).toBe('The face is missing for more than 1 s at a stretch (from 0.80 s)');
    expect(existsSync(out)).toBe(false);
    expect(readdirSync(tmp).filter((f) => f.startsWith('long-gap'))).toEqual([]);
  });

  it('refuses a video without a face (face_missing, no_face), and stops decoding once that is settled', async () => {
    const err = await refusal(
      buildFrameCacheFromVideo(file(testVideo({ fixture: 'brick', seconds: 8 })), join(tmp, 'brick'), opts()),
    );
    expect(err.code).toBe('face_missing');
    expect(err.details).toMatchObject({ reason: 'no_face', gapFrames: 26 });
  });

  it('refuses too many bad frames even when each stretch is short', async () => {
    // One stretch of 10 frames (under the 1 s gap) in 75: 13% bad.
    const video = testVideo({ seconds: 3, blackout: [5, 14] });
    const err = await refusal(buildFrameCacheFromVideo(file(video), join(tmp, 'bad'), opts({ maxBadFraction: 0.1 })));
    expect(err.code).toBe('face_missing');
    expect(err.message).toMatch(/in 10 of its 75 frames \(at most 10% allowed\)/);
  });

  it('refuses a face too small to animate in too many frames (face_unusable, with the rig reason)', async () => {
    const err = await refusal(
      buildFrameCacheFromVideo(
        file(testVideo({ seconds: 1 })),
        join(tmp, 'small'),
        opts({ limits: { minFaceSizePx: 200 } }),
      ),
    );
    expect(err.code).toBe('face_unusable');
    expect(err.details.reason).toBe('face_too_small');
  });

  it('refuses what is not a usable video: bytes that are no video, a still image, too long, too large', async () => {
    expect(
      (
        await refusal(
          buildFrameCacheFromVideo(file(Buffer.from('not a video at all, just text')), join(tmp, 'x1'), opts()),
        )
      ).code,
    ).toBe('invalid_video');
    expect(
      (await refusal(buildFrameCacheFromVideo(join(RIG_FIXTURES, 'astronaut.jpg'), join(tmp, 'x2'), opts()))).code,
    ).toBe('too_short');
    const twoSeconds = file(testVideo({ seconds: 2 }));
    const long = await refusal(buildFrameCacheFromVideo(twoSeconds, join(tmp, 'x3'), opts({ maxSeconds: 1 })));
    expect(long).toMatchObject({ code: 'too_long', message: 'The video is longer than 1 s' });
    expect(
      (await refusal(buildFrameCacheFromVideo(twoSeconds, join(tmp, 'x4'), opts({ maxInputBytes: 1000 })))).code,
    ).toBe('too_large');
    expect(readdirSync(tmp).filter((f) => /^x\d/.test(f))).toEqual([]);
    await expect(buildFrameCacheFromVideo(twoSeconds, join(tmp, 'x5'), opts({ width: 511 }))).rejects.toThrow(
      RangeError,
    );
  });

  it('stops when its signal aborts', async () => {
    const ac = new AbortController();
    const p = buildFrameCacheFromVideo(file(testVideo({ seconds: 4 })), join(tmp, 'aborted'), {
      ...opts(),
      signal: ac.signal,
    });
    ac.abort(new Error('stop now'));
    await expect(p).rejects.toThrow('stop now');
    expect(existsSync(join(tmp, 'aborted'))).toBe(false);
  });
});
