/** Helpers shared by the generate and framecache tests (not used by the library). */
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { detectFaceRig } from '../rig/index.ts';
import type { FaceRig } from '../rig/types.ts';

const fixture = (name: string): string => fileURLToPath(new URL(`../rig/fixtures/${name}`, import.meta.url));
export const ASTRONAUT = fixture('astronaut.jpg');
export const HOPPER = fixture('grace_hopper.jpg');
export const ROCKET = fixture('rocket.jpg');

async function toPng(rgba: Uint8Array, width: number, height: number): Promise<Buffer> {
  return sharp(Buffer.from(rgba), { raw: { width, height, channels: 4 } })
    .png()
    .toBuffer();
}

/** The rig re-detected on a rendered frame. */
export async function detectOn(rgba: Uint8Array, width: number, height: number): Promise<FaceRig> {
  return detectFaceRig(await toPng(rgba, width, height));
}

/** Mean absolute difference over RGB, 0..255. */
export function meanAbsDiff(a: Uint8Array, b: Uint8Array): number {
  let s = 0;
  let n = 0;
  for (let i = 0; i < a.length; i += 4) {
    s += Math.abs(a[i]! - b[i]!) + Math.abs(a[i + 1]! - b[i + 1]!) + Math.abs(a[i + 2]! - b[i + 2]!);
    n += 3;
  }
  return s / n;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

export const eyeOpenness = (r: FaceRig): number => (r.eyes.left.openness + r.eyes.right.openness) / 2;
