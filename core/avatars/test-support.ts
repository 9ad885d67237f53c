import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveFfmpegPath } from '../../render/encode/mp4.ts';

export const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../render/rig/fixtures');

/** A 1 s MP4 of a still fixture (`-loop 1 -t 1`), optionally rotated by `rotateDeg` (clockwise: a head roll). */
export function stillMp4(fixture: string, o: { rotateDeg?: number } = {}): Buffer {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'still-mp4-'));
  const out = path.join(dir, 'clip.mp4');
  execFileSync(resolveFfmpegPath(), [
    '-v',
    'error',
    '-y',
    '-loop',
    '1',
    '-t',
    '1',
    '-i',
    path.join(FIXTURES, `${fixture}.jpg`),
    '-vf',
    `${o.rotateDeg ? `rotate=${(o.rotateDeg * Math.PI) / 180},` : ''}scale=trunc(iw/2)*2:trunc(ih/2)*2`,
    '-r',
    '10',
    '-pix_fmt',
    'yuv420p',
    '-c:v',
    'libx264',
    out,
  ]);
  const bytes = readFileSync(out);
  rmSync(dir, { recursive: true, force: true });
  return bytes;
}
