/**
 * The mouth gallery (docs/mouth-gallery.md): for every fixture face, enlarged mouth crops per sound
 * (closed, m/b/p, a, e, o, u, f), the previous renderer's row above the current one's.
 *
 *   npx tsx render/synth/examples/make-gallery.ts [--out DIR] [faces...]
 *   npx tsx render/synth/examples/make-gallery.ts --blind   (docs/mouth-blind.md, unlabelled, random sides)
 *
 * The previous renderer is the graph before the articulatory rework (render/synth/fixtures/
 * mouth_synth_v1.onnx: open, wide, round), driven by its own viseme table. The current one gets the
 * product's table (render/visemes) with `relax` at 1, as in the middle of an utterance.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp, { type OverlayOptions } from 'sharp';
import { detectFaceRig, type FaceRig } from '../../rig/index.ts';
import { mouthShape } from '../../talking-head/index.ts';
import { synthesize } from '../../tts/index.ts';
import { visemeTrack, type Viseme } from '../../visemes/index.ts';
import { GALLERY_FACES, GALLERY_SOUNDS, PREVIOUS_SYNTH_MODEL, previousShape, speakingShape } from '../compare.ts';
import { createMouthSynth, fromCrop, prepareFaceForSynth } from '../index.ts';
import type { MouthShape, MouthSynth, PreparedFace, RgbaFrame } from '../index.ts';
import { chroma, drawnCoverage, hue, hueDistance, lipContourEdges, mouthPicture, references } from '../quality.ts';
import { prng } from '../../generate/track.ts';
import { portraitFrame } from './make-stills.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
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

/** Who each gallery face is (render/rig/fixtures/SOURCES.md has the sources and licences). */
const FACE_NOTES: Record<string, string> = {
  grace_hopper: 'Grace Hopper, U.S. Navy portrait (matplotlib): older, glasses, a closed mouth, strongly textured skin',
  astronaut: 'Eileen Collins, NASA portrait (scikit-image): a broad smile showing her teeth',
  barkla: 'Charles Barkla, c. 1917 (xraylarch): a moustache, a monochrome photograph',
  mendeleev: 'Dmitri Mendeleev, 1870s-80s (xraylarch): a full beard over the mouth',
  moseley: 'Henry Moseley, 1914 (xraylarch): a young man, a moustache, a small original enlarged',
  curie: 'Marie Curie, 1903 (xraylarch): a small, soft original, head turned about 24 degrees',
};

interface Renderer {
  name: string;
  synth: MouthSynth;
  shape: (v: Viseme) => MouthShape;
}

/** One enlarged mouth tile (PNG, TILE_W x TILE_H) of a drawn frame. */
function mouthTile(frame: RgbaFrame & { data: Buffer }, rect: ReturnType<typeof mouthTileRect>): Promise<Buffer> {
  const raw = { raw: { width: frame.width, height: frame.height, channels: 4 as const } };
  return sharp(frame.data, raw)
    .extract(rect)
    .resize(TILE_W, TILE_H, { kernel: 'lanczos3' })
    .removeAlpha()
    .png()
    .toBuffer();
}

/** One face's strip of enlarged mouth tiles per sound, and the picture's measures at "a". */
async function strip(
  r: Renderer,
  frame: RgbaFrame & { data: Buffer },
  face: PreparedFace,
  lips: FaceRig['lips'],
  file: string,
) {
  const rect = mouthTileRect(face, frame.width, frame.height);
  const tiles: Buffer[] = [];
  let measures: { teethHue: number; teethChroma: number; cavityL: number; lipEdges: number } | null = null;
  for (const { viseme } of GALLERY_SOUNDS) {
    const shape = r.shape(viseme);
    const out = { ...frame, data: Buffer.from(await r.synth.renderFrame(frame, face, shape)) };
    tiles.push(await mouthTile(out, rect));
    if (viseme === 'aa') {
      const coverage = await drawnCoverage(r.synth, frame, face, shape);
      const pic = mouthPicture(out, frame, face, coverage);
      const { skin } = references(frame, face);
      const edges = lipContourEdges(out, frame, face, coverage, lips);
      measures = {
        teethHue: pic.teeth && chroma(skin) >= 3 ? hueDistance(hue(pic.teeth.lab), hue(skin)) : NaN,
        teethChroma: pic.teeth && chroma(skin) >= 3 ? chroma(pic.teeth.lab) / chroma(skin) : NaN,
        cavityL: pic.cavity?.p10 ?? NaN,
        lipEdges: edges.out / edges.source,
      };
    }
  }
  await sharp({
    create: { width: TILE_W * tiles.length + 4 * (tiles.length - 1), height: TILE_H, channels: 3, background: '#fff' },
  })
    .composite(tiles.map((t, i) => ({ input: t, left: i * (TILE_W + 4), top: 0 })))
    .jpeg({ quality: 88 })
    .toFile(file);
  return measures!;
}

/** The sentence the motion clips speak (the embedded TTS, its phone timings). */
export const MOTION_SENTENCE = 'Hello! I am your new avatar. How can I help you today?';
/** The faces shown in motion in the gallery. */
const MOTION_FACES = ['grace_hopper', 'astronaut', 'barkla'];

/**
 * One face speaking MOTION_SENTENCE at about 1x, the previous renderer beside this one, as an animated
 * WebP at 25 fps: the lower face (2.4 mouth widths square, at most 160 px) of each, side by side, the
 * still portrait under both (no head motion, so only the mouth differs).
 */
async function motion(renderers: readonly Renderer[], name: string, file: string): Promise<void> {
  const frame = await portraitFrame(name);
  const raw = { raw: { width: frame.width, height: frame.height, channels: 4 as const } };
  const face = prepareFaceForSynth(await detectFaceRig(await sharp(frame.data, raw).png().toBuffer()));
  const speech = await synthesize({ text: MOTION_SENTENCE });
  const track = visemeTrack(speech.phones, 25, { durationSeconds: speech.durationSeconds + 0.6 });
  const side = Math.round(face.mouthWidth * 2.4);
  const tile = mouthTileRect(face, frame.width, frame.height);
  const rect = {
    left: Math.max(0, Math.min(frame.width - side, Math.round(tile.left + tile.width / 2 - side / 2))),
    top: Math.max(0, Math.min(frame.height - side, Math.round(tile.top + tile.height / 2 - side * 0.45))),
    width: side,
    height: side,
  };
  const tileSide = Math.min(side, 160); // a large face shrinks a little: the clip stays light
  const pages: Buffer[] = [];
  for (const m of track.frames) {
    const tiles = await Promise.all(
      renderers.map(async (r) => {
        const shape =
          r.name === 'previous' ? { open: m.closed ? 0 : m.open, wide: m.wide, round: m.round } : mouthShape(m);
        const out = Buffer.from(await r.synth.renderFrame(frame, face, shape));
        return sharp(out, raw).extract(rect).resize(tileSide, tileSide).removeAlpha().raw().toBuffer();
      }),
    );
    const n = tileSide;
    const row = Buffer.alloc(n * 3 * renderers.length * n);
    for (let y = 0; y < n; y++)
      tiles.forEach((t, i) => t.copy(row, (y * renderers.length + i) * n * 3, y * n * 3, (y + 1) * n * 3));
    pages.push(row);
  }
  await sharp(Buffer.concat(pages), {
    raw: { width: tileSide * renderers.length, height: tileSide * pages.length, channels: 3, pageHeight: tileSide },
  })
    .webp({ quality: 70, loop: 0, delay: pages.map(() => 40) })
    .toFile(file);
}

/** The sounds of the blind sheet: every gallery sound the two renderers draw differently (closed is the portrait). */
const BLIND_SOUNDS = GALLERY_SOUNDS.filter((s) => s.viseme !== 'sil');

/**
 * The blind comparison (docs/mouth-blind.md): per face, one row per sound with the two renderers'
 * tiles side by side, which one is left drawn at random per row (seeded, so the sheet is
 * reproducible), no labels. The key goes to its own file (docs/mouth-blind-key.md), to be opened
 * after choosing.
 */
async function blind(renderers: readonly Renderer[], faces: readonly string[], out: string): Promise<void> {
  const random = prng('mouth-blind');
  const sheets: string[] = [];
  const keys: string[] = [];
  const gap = 8;
  for (const name of faces) {
    const frame = await portraitFrame(name);
    const raw = { raw: { width: frame.width, height: frame.height, channels: 4 as const } };
    const face = prepareFaceForSynth(await detectFaceRig(await sharp(frame.data, raw).png().toBuffer()));
    const rect = mouthTileRect(face, frame.width, frame.height);
    const cells: OverlayOptions[] = [];
    const sides: string[] = [];
    for (const [row, { label, viseme }] of BLIND_SOUNDS.entries()) {
      const order = random() < 0.5 ? [...renderers] : [...renderers].reverse();
      sides.push(`${row + 1} (${label}): A is ${order[0]!.name}`);
      for (const [col, r] of order.entries()) {
        const drawn = { ...frame, data: Buffer.from(await r.synth.renderFrame(frame, face, r.shape(viseme))) };
        cells.push({ input: await mouthTile(drawn, rect), left: col * (TILE_W + gap), top: row * (TILE_H + gap) });
      }
    }
    const size = { width: 2 * TILE_W + gap, height: BLIND_SOUNDS.length * (TILE_H + gap) - gap };
    await sharp({ create: { ...size, channels: 3, background: '#fff' } })
      .composite(cells)
      .jpeg({ quality: 88 })
      .toFile(join(out, `${name}.jpg`));
    const n = faces.indexOf(name) + 1;
    sheets.push(`## Face ${n}\n\n![face ${n}](img/mouth-blind/${name}.jpg)`);
    keys.push(`- Face ${n} (${name}): ${sides.join('; ')}`);
  }
  const intro = [
    '# The mouth, blind',
    '',
    'Two renderers of the same portrait and sound, side by side: the mouth before the articulatory rework and the',
    "product's. Which one is on the left (A) is drawn at random per row, and nothing says which is which. For each row,",
    'note the one that looks more like the person speaking (lips kept, a shaded mouth rather than a hole, no seam),',
    `then compare with the key: docs/mouth-blind-key.md. Rows, top to bottom: ${BLIND_SOUNDS.map((s) => s.label).join(', ')}.`,
    'Made by `npx tsx render/synth/examples/make-gallery.ts --blind`.',
    '',
  ];
  writeFileSync(join(ROOT, 'docs/mouth-blind.md'), `${intro.join('\n')}\n${sheets.join('\n\n')}\n`);
  writeFileSync(join(ROOT, 'docs/mouth-blind-key.md'), `# The key to docs/mouth-blind.md\n\n${keys.join('\n')}\n`);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const flag = (name: string): string | undefined => {
    const i = args.indexOf(name);
    if (i < 0) return undefined;
    const v = args[i + 1];
    args.splice(i, 2);
    return v;
  };
  // --model PATH --label NAME: one strip per face from another graph of the contract (the pictures
  // of what was tried and rejected, docs/render.md), written to --out as <face>_<label>.jpg
  const model = flag('--model');
  const label = flag('--label') ?? 'variant';
  const out = flag('--out') ?? join(ROOT, model ? 'docs/img/mouth-tried' : 'docs/img/mouth-gallery');
  const blindSheet = args.includes('--blind');
  if (blindSheet) args.splice(args.indexOf('--blind'), 1);
  const faces = args.length ? args : GALLERY_FACES;
  mkdirSync(out, { recursive: true });
  const renderers: Renderer[] = model
    ? [{ name: label, synth: await createMouthSynth({ modelPath: model }), shape: speakingShape }]
    : [
        { name: 'previous', synth: await createMouthSynth({ modelPath: PREVIOUS_SYNTH_MODEL }), shape: previousShape },
        { name: 'current', synth: await createMouthSynth(), shape: speakingShape },
      ];
  if (blindSheet) {
    const dir = join(ROOT, 'docs/img/mouth-blind');
    mkdirSync(dir, { recursive: true });
    await blind(renderers, faces, dir);
    for (const r of renderers) await r.synth.release();
    return;
  }
  const raw = { raw: { width: 512, height: 512, channels: 4 as const } };
  const f2 = (x: number) => (Number.isNaN(x) ? '-' : x.toFixed(2));
  const sections: string[] = [];
  for (const name of faces) {
    const frame = await portraitFrame(name);
    const rig = await detectFaceRig(await sharp(frame.data, raw).png().toBuffer());
    const face = prepareFaceForSynth(rig);
    const rows: string[] = [];
    for (const r of renderers) {
      const m = await strip(r, frame, face, rig.lips, join(out, `${name}_${r.name}.jpg`));
      rows.push(`| ${r.name} | ${f2(m.teethHue)} | ${f2(m.teethChroma)} | ${f2(m.cavityL)} | ${f2(m.lipEdges)} |`);
    }
    const { dark } = references(frame, face);
    sections.push(
      [
        `## ${FACE_NOTES[name] ?? name}`,
        '',
        `Previous:\n\n![${name}, previous](img/mouth-gallery/${name}_previous.jpg)`,
        '',
        `Current:\n\n![${name}, current](img/mouth-gallery/${name}_current.jpg)`,
        '',
        `At "a" (mouth ${face.mouthWidth.toFixed(0)} px wide; the portrait's own darks L* ${dark[0].toFixed(1)}):`,
        '',
        "| renderer | teeth hue from the skin's (degrees) | teeth chroma / skin chroma | cavity L* (10th percentile) | lip edges / the portrait's |",
        '| --- | --- | --- | --- | --- |',
        ...rows,
      ].join('\n'),
    );
    process.stdout.write(`${name}: mouth ${face.mouthWidth.toFixed(1)} px\n`);
  }
  if (!model && !args.length)
    for (const name of MOTION_FACES) await motion(renderers, name, join(out, `${name}_motion.webp`));
  for (const r of renderers) await r.synth.release();
  if (model || args.length) return;
  const header = [
    '# The mouth gallery',
    '',
    'Enlarged mouth crops (two mouth widths across, lanczos) of each gallery face at seven sounds, in order:',
    `${GALLERY_SOUNDS.map((s) => `**${s.label}**`).join(' · ')}. "Previous" is the graph before the articulatory rework`,
    '(render/synth/fixtures/mouth_synth_v1.onnx, driven by its own viseme table); "current" is the product\'s, with the',
    'viseme table of render/visemes and `relax` at 1, as in the middle of an utterance. Made by',
    '`npx tsx render/synth/examples/make-gallery.ts` (a few seconds), which also measures each face at "a" (render/synth/quality.ts,',
    "Lab in sRGB/D65): the natural ranges are a teeth hue within 20 degrees of the skin's and 0.35 to 1 of its chroma (a",
    "monochrome photograph has none), a cavity no darker than the portrait's own darks less 5 L* (and not under 5), and lip",
    "edges near the portrait's own (1). A portrait that shows its own teeth keeps them (the astronaut): there the",
    'teeth columns read the brightest drawn pixels, its lower teeth and the front of its tongue.',
    '',
    'The four official White House photographs among the fixtures (render/rig/fixtures/SOURCES.md) are held to the',
    'same tests (render/synth/picture.test.ts) but not shown here: their usage notice asks that they not be shown',
    'manipulated. What was tried and rejected on the way: docs/render.md. The same tiles unlabelled, in random order,',
    'for a blind comparison: docs/mouth-blind.md.',
    '',
    `In motion at 1x (previous left, current right; "${MOTION_SENTENCE}", the still portrait, 25 fps):`,
    '',
    ...MOTION_FACES.map((f) => `![${f} in motion, previous and current](img/mouth-gallery/${f}_motion.webp)`),
    '',
  ];
  writeFileSync(join(ROOT, 'docs/mouth-gallery.md'), `${header.join('\n')}\n${sections.join('\n\n')}\n`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
