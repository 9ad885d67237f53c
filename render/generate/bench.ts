/**
 * benchGenerate(): how fast a 5 s, 512x512, 25 fps clip is generated (frames rendered per
 * second, the warp alone), beside the cost of encoding one frame to JPEG (q90, the frame
 * cache's format) and decoding it back, measured in the same run on the same frames.
 *
 *   npx tsx render/generate/bench.ts          # prints the result as JSON
 */
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { encodeJpeg, rgbaToI420, i420ToRgba } from '../encode/index.ts';
import { generateClip, preparePortrait } from './generate.ts';

export interface GenerateBench {
  portrait: string;
  size: number;
  fps: number;
  frames: number;
  /** Framing + rig-to-model preparation (once per avatar), ms. */
  prepareMs: number;
  /** Rendering the clip's frames (warp + moved landmarks), total ms and per frame. */
  renderMs: number;
  renderMsPerFrame: number;
  renderFramesPerSecond: number;
  /** JPEG q90 encode of one frame (sharp/libjpeg-turbo), ms, mean over the clip's frames. */
  jpegEncodeMsPerFrame: number;
  /** JPEG decode to RGBA (what the frame cache reader does), ms per frame. */
  jpegDecodeMsPerFrame: number;
  /** I420 -> RGBA (the frame cache reader's raw "i420" codec), ms per frame. */
  i420ToRgbaMsPerFrame: number;
  jpegBytesPerFrame: number;
  /** Seconds of video generated per second of one core (render only). */
  realtimeFactor: number;
}

export async function benchGenerate(
  options: { portrait?: string; size?: number; fps?: number; prompt?: string } = {},
): Promise<GenerateBench> {
  const portrait = options.portrait ?? fileURLToPath(new URL('../rig/fixtures/astronaut.jpg', import.meta.url));
  const size = options.size ?? 512;
  const fps = options.fps ?? 25;
  let t = performance.now();
  const p = await preparePortrait(portrait, { width: size });
  const prepareMs = performance.now() - t;
  const clip = await generateClip(p, {
    motionPrompt: options.prompt ?? 'nod slowly, then smile and raise eyebrows',
    durationSeconds: 5,
    fps,
  });
  // Warm-up (JIT) on a few frames, not counted.
  for (let i = 0; i < 5; i++) clip.renderFrame(i * 20);
  const buf = new Uint8Array(size * size * 4);
  const kept: Uint8Array[] = [];
  t = performance.now();
  for (let i = 0; i < clip.frameCount; i++) {
    clip.renderFrame(i, buf);
    if (i % 10 === 0) kept.push(buf.slice());
  }
  const renderMs = performance.now() - t;

  await encodeJpeg(kept[0]!, size, size, { quality: 90 });
  const jpegs: Uint8Array[] = [];
  t = performance.now();
  for (const f of kept) jpegs.push(await encodeJpeg(f, size, size, { quality: 90 }));
  const jpegEncodeMsPerFrame = (performance.now() - t) / kept.length;
  t = performance.now();
  for (const j of jpegs) await sharp(j).ensureAlpha().raw().toBuffer();
  const jpegDecodeMsPerFrame = (performance.now() - t) / jpegs.length;
  const i420 = kept.map((f) => rgbaToI420(f, size, size));
  t = performance.now();
  for (const f of i420) i420ToRgba(f, size, size);
  const i420ToRgbaMsPerFrame = (performance.now() - t) / i420.length;

  const renderMsPerFrame = renderMs / clip.frameCount;
  return {
    portrait,
    size,
    fps,
    frames: clip.frameCount,
    prepareMs: round(prepareMs),
    renderMs: round(renderMs),
    renderMsPerFrame: round(renderMsPerFrame),
    renderFramesPerSecond: round(1000 / renderMsPerFrame),
    jpegEncodeMsPerFrame: round(jpegEncodeMsPerFrame),
    jpegDecodeMsPerFrame: round(jpegDecodeMsPerFrame),
    i420ToRgbaMsPerFrame: round(i420ToRgbaMsPerFrame),
    jpegBytesPerFrame: Math.round(jpegs.reduce((s, j) => s + j.length, 0) / jpegs.length),
    realtimeFactor: round(1000 / renderMsPerFrame / fps),
  };
}

function round(v: number): number {
  return Math.round(v * 100) / 100;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  benchGenerate().then(
    (r) => process.stdout.write(`${JSON.stringify(r, null, 2)}\n`),
    (e: unknown) => {
      process.stderr.write(`${String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
