/**
 * The mouth gallery (docs/mouth-gallery.md): for every fixture face, enlarged mouth crops per sound
 * (closed, m/b/p, a, e, o, u, f), the previous renderer's row above the current one's.
 *
 *   npx tsx render/synth/examples/make-gallery.ts [--out DIR] [faces...]
 *
 * The previous renderer is the graph before the articulatory rework (render/synth/fixtures/
 * mouth_synth_v1.onnx: open, wide, round), driven by its own viseme table. The current one gets the
 * product's table (render/visemes) with `relax` at 1, as in the middle of an utterance.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { detectFaceRig } from '../../rig/index.ts';
import { VISEME_PARAMS, type Viseme } from '../../visemes/index.ts';
import { createMouthSynth, fromCrop, prepareFaceForSynth } from '../index.ts';
import type { MouthShape, PreparedFace } from '../index.ts';
import { portraitFrame } from './make-stills.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** The graph before the articulatory rework (render/synth/fixtures/README.md). */
export const PREVIOUS_SYNTH_MODEL = fileURLToPath(new URL('../fixtures/mouth_synth_v1.onnx', import.meta.url));

/** The sounds shown, in order, with the viseme each stands for. */
export const GALLERY_SOUNDS: readonly { label: string; viseme: Viseme }[] = [
  { label: 'closed', viseme: 'sil' },
  { label: 'm b p', viseme: 'PP' },
  { label: 'a', viseme: 'aa' },
  { label: 'e', viseme: 'E' },
  { label: 'o', viseme: 'oh' },
  { label: 'u', viseme: 'ou' },
  { label: 'f', viseme: 'FF' },
];

/** The previous renderer's viseme table (open, wide, round), as it shipped with it. */
export const PREVIOUS_PARAMS: Partial<Record<Viseme, [number, number, number]>> = {
  sil: [0, 0, 0],
  PP: [0, 0, 0.1],
  aa: [0.75, 0.2, 0],
  E: [0.5, 0.5, 0],
  oh: [0.55, 0, 0.6],
  ou: [0.2, 0, 0.9],
  FF: [0.08, 0.2, 0],
};

/** Every frontal fixture face (render/rig/fixtures/SOURCES.md): the picture tests hold the mouth on each. */
export const FIXTURE_FACES = ['grace_hopper', 'astronaut', 'barkla', 'mendeleev', 'moseley', 'curie', 'biden', 'obama', 'obama_speech', 'obama_small'];

/**
 * The gallery's faces: the fixtures less the four official White House photographs, whose usage
 * notice asks that they not be shown manipulated (SOURCES.md); the tests still hold the mouth on them.
 */
export const GALLERY_FACES = FIXTURE_FACES.filter((f) => !['biden', 'obama', 'obama_speech', 'obama_small'].includes(f));

/** The current renderer's shape for a viseme in the middle of an utterance. */
export function speakingShape(viseme: Viseme): MouthShape {
  return { ...VISEME_PARAMS[viseme], relax: viseme === 'sil' ? 0 : 1 };
}

export function previousShape(viseme: Viseme): MouthShape {
  const [open, wide, round] = PREVIOUS_PARAMS[viseme]!;
  return { open, wide, round, press: 0, tuck: 0, relax: 0 };
}

/** The frame rectangle around the mouth shown per tile: 2 mouth widths across, 1.4 tall. */
export function mouthTileRect(face: PreparedFace, width: number, height: number) {
  const lips = face.lips;
  const [cx, cy] = [(lips[2 * 20]! + lips[2 * 30]!) / 2, (lips[2 * 25 + 1]! + lips[2 * 35 + 1]!) / 2];
  const centre = fromCrop(face.box, { x: cx, y: cy });
  const w = Math.round(face.mouthWidth * 2);
  const h = Math.round(face.mouthWidth * 1.4);
  const left = Math.min(Math.max(0, Math.round(centre.x - w / 2)), width - w);
  const top = Math.min(Math.max(0, Math.round(centre.y - h / 2 + face.mouthWidth * 0.1)), height - h);
  return { left, top, width: w, height: h };
}

const TILE_W = 240;
const TILE_H = 168;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const flag = (name: string): string | undefined => {
    const i = args.indexOf(name);
    if (i < 0) return undefined;
    const v = args[i + 1];
    args.splice(i, 2);
    return v;
  };
  const out = flag('--out') ?? join(ROOT, 'docs/img/mouth-gallery');
  const faces = args.length ? args : GALLERY_FACES;
  mkdirSync(out, { recursive: true });
  const renderers = [
    { name: 'previous', synth: await createMouthSynth({ modelPath: PREVIOUS_SYNTH_MODEL }), shape: previousShape },
    { name: 'current', synth: await createMouthSynth(), shape: speakingShape },
  ];
  const raw = { raw: { width: 512, height: 512, channels: 4 as const } };
  for (const name of faces) {
    const frame = await portraitFrame(name);
    const rig = await detectFaceRig(await sharp(frame.data, raw).png().toBuffer());
    const face = prepareFaceForSynth(rig);
    const rect = mouthTileRect(face, 512, 512);
    for (const r of renderers) {
      const tiles: Buffer[] = [];
      for (const { viseme } of GALLERY_SOUNDS) {
        const rgba = Buffer.from(await r.synth.renderFrame(frame, face, r.shape(viseme)));
        tiles.push(await sharp(rgba, raw).extract(rect).resize(TILE_W, TILE_H, { kernel: 'lanczos3' }).removeAlpha().png().toBuffer());
      }
      const strip = sharp({ create: { width: TILE_W * tiles.length + 4 * (tiles.length - 1), height: TILE_H, channels: 3, background: '#fff' } });
      await strip
        .composite(tiles.map((t, i) => ({ input: t, left: i * (TILE_W + 4), top: 0 })))
        .png()
        .toFile(join(out, `${name}_${r.name}.png`));
    }
    process.stdout.write(`${name}: mouth ${face.mouthWidth.toFixed(1)} px\n`);
  }
  for (const r of renderers) await r.synth.release();
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
