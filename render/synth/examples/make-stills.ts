/**
 * Regenerate the example stills in this folder:
 *   npx tsx render/synth/examples/make-stills.ts [--png DIR] [fixture names...]
 * Each fixture portrait is fitted into 512x512 (the face fills about half of
 * it), rigged, and rendered with five mouth shapes; a strip of the mouth
 * region (2x) and two whole frames are written as JPEG (and every frame as PNG to DIR).
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { detectFaceRig } from '../../rig/index.ts';
import { createMouthSynth, prepareFaceForSynth } from '../index.ts';
import type { MouthShape } from '../index.ts';

const HERE = fileURLToPath(new URL('./', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../../rig/fixtures/', import.meta.url));

export const STILL_SHAPES: Record<string, MouthShape> = {
  closed: { open: 0, wide: 0, round: 0 },
  half: { open: 0.45, wide: 0, round: 0 },
  open: { open: 0.9, wide: 0, round: 0 },
  wide: { open: 0.25, wide: 1, round: 0 },
  round: { open: 0.3, wide: 0, round: 1 },
};

/** Shapes also written as whole 512x512 frames (the strip has all five, mouth region, 2x). */
const FULL_FRAMES = ['half', 'open'];

/** A fixture as a 512x512 RGBA frame (cover-cropped from the top, so the face fills about half). */
export async function portraitFrame(
  name: string,
  size = 512,
): Promise<{ data: Buffer; width: number; height: number }> {
  const { data } = await sharp(`${FIXTURES}${name}.jpg`)
    .resize(size, size, { fit: 'cover', position: 'top' })
    .ensureAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { data, width: size, height: size };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  let pngDir: string | undefined;
  const pi = args.indexOf('--png');
  if (pi >= 0) {
    pngDir = args[pi + 1];
    args.splice(pi, 2);
  }
  const names = args.length ? args : ['grace_hopper', 'astronaut'];
  if (pngDir) mkdirSync(pngDir, { recursive: true });
  const synth = await createMouthSynth();
  for (const name of names) {
    const frame = await portraitFrame(name);
    const raw = { raw: { width: 512, height: 512, channels: 4 as const } };
    const rig = await detectFaceRig(await sharp(frame.data, raw).png().toBuffer());
    const face = prepareFaceForSynth(rig);
    const tiles: Buffer[] = [];
    const tile = 256;
    const s = Math.round(face.box.size);
    const left = Math.min(Math.max(0, Math.round(face.box.cx - s / 2)), 512 - s);
    const top = Math.min(Math.max(0, Math.round(face.box.cy - s / 2)), 512 - s);
    for (const [k, shape] of Object.entries(STILL_SHAPES)) {
      const out = Buffer.from(await synth.renderFrame(frame, face, shape));
      tiles.push(
        await sharp(out, raw)
          .extract({ left, top, width: s, height: s })
          .resize(tile, tile)
          .removeAlpha()
          .png()
          .toBuffer(),
      );
      const full = sharp(out, raw).removeAlpha();
      if (FULL_FRAMES.includes(k)) await full.clone().jpeg({ quality: 80 }).toFile(`${HERE}${name}_${k}.jpg`);
      if (pngDir) await full.clone().png().toFile(`${pngDir}/${name}_${k}.png`);
    }
    const strip = sharp({
      create: { width: tile * tiles.length, height: tile, channels: 3, background: '#000' },
    }).composite(tiles.map((t, i) => ({ input: t, left: i * tile, top: 0 })));
    const buf = await strip.png().toBuffer();
    await sharp(buf).jpeg({ quality: 85 }).toFile(`${HERE}${name}_strip.jpg`);
    if (pngDir) await sharp(buf).toFile(`${pngDir}/${name}_strip.png`);
    process.stdout.write(`${name}: mouth ${face.mouthWidth.toFixed(1)} px, crop ${face.box.size.toFixed(1)} px\n`);
  }
  await synth.release();
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
