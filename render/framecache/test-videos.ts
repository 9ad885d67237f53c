/**
 * Test videos made with the real ffmpeg from the rig's portrait fixtures (render/rig/fixtures):
 * a face that moves (a slow pan and zoom over the photo), optionally blacked out for a stretch of
 * frames, at any size. Shared by the frame-cache, uploaded-clip and scene tests.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveFfmpegPath } from '../encode/mp4.ts';

export const RIG_FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../rig/fixtures');

/** A square around the face of photos where it is small (fractions of the photo): the face then fills about 40% of the picture's height. */
const FOCUS: Record<string, { left: number; top: number; size: number }> = {
  astronaut: { left: 0.19, top: 0, size: 0.5 },
};

export interface TestVideoOptions {
  /** A rig fixture: astronaut (one face), brick (no face), ... Default astronaut. */
  fixture?: string;
  seconds?: number;
  fps?: number;
  /** Picture size, default 640x360 (the square photo centred on a wider frame). */
  width?: number;
  height?: number;
  /** Frames [from, to] (inclusive) painted black: a face missing for a while. */
  blackout?: [number, number];
  /** Container and codec: mp4 (H.264, default) or webm (VP8). */
  format?: 'mp4' | 'webm';
}

/** The bytes of a test video: the photo, gently panning and zooming, at the given size. */
export function testVideo(o: TestVideoOptions = {}): Buffer {
  const { fixture = 'astronaut', seconds = 2, fps = 25, width = 640, height = 360, format = 'mp4' } = o;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'test-video-'));
  try {
    const out = path.join(dir, `clip.${format}`);
    // Zoom between 1.0 and 1.1 and drift sideways: the face moves a few pixels a frame, as a person's does.
    const side = Math.min(width, height);
    const focus = FOCUS[fixture];
    const vf = [
      ...(focus ? [`crop=iw*${focus.size}:ih*${focus.size}:iw*${focus.left}:ih*${focus.top}`] : []),
      `scale=${side}:${side}`,
      `zoompan=z='1.05+0.05*sin(on/9)':x='iw/2-(iw/zoom/2)+8*sin(on/6)':y='ih/2-(ih/zoom/2)':d=1:s=${side}x${side}:fps=${fps}`,
      `pad=${width}:${height}:(ow-iw)/2:(oh-ih)/2:gray`,
      ...(o.blackout
        ? [`drawbox=x=0:y=0:w=iw:h=ih:color=black:t=fill:enable='between(n,${o.blackout[0]},${o.blackout[1]})'`]
        : []),
      'format=yuv420p',
    ].join(',');
    const codec = format === 'webm' ? ['-c:v', 'libvpx', '-b:v', '1M'] : ['-c:v', 'libx264', '-preset', 'veryfast'];
    execFileSync(resolveFfmpegPath(), [
      '-v',
      'error',
      '-y',
      '-loop',
      '1',
      '-framerate',
      String(fps),
      '-t',
      String(seconds),
      '-i',
      path.join(RIG_FIXTURES, `${fixture}.jpg`),
      '-vf',
      vf,
      '-r',
      String(fps),
      ...codec,
      out,
    ]);
    return readFileSync(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
