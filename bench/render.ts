import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { benchGenerate } from '../render/generate/bench.ts';
import { chromaAligned, i420RectToRgba, i420Size, rgbaRectToI420, rgbaToI420 } from '../render/encode/index.ts';
import {
  createLipSync,
  lipSyncRegion,
  parseLipSyncChoice,
  type LipSyncEngine,
  type LipSyncI420Item,
} from '../render/lipsync/index.ts';
import { benchLipSyncByDevice, msPer } from '../render/lipsync/device-bench.ts';
import { detectFaceRig } from '../render/rig/index.ts';
import { benchSynth } from '../render/synth/bench.ts';
import { PREVIOUS_SYNTH_MODEL, previousShape, speakingShape } from '../render/synth/compare.ts';
import { createMouthSynth, prepareFaceForSynth } from '../render/synth/index.ts';
import { closeTts, synthesizeStream, warmUpTts } from '../render/tts/index.ts';
import { AudioVisemeStream, visemeTrack, warmUpAudioVisemes, type Viseme } from '../render/visemes/index.ts';
import type { BenchModule, BenchReport } from './types.ts';

const PORTRAIT = fileURLToPath(new URL('../render/rig/fixtures/grace_hopper.jpg', import.meta.url));
const TINY_WAV2LIP = fileURLToPath(new URL('../render/models/lipsync/tiny_wav2lip.onnx', import.meta.url));

/** A 512x512 RGBA frame of the portrait, face filling about half of it, and its rig. */
export async function frame512() {
  const data = await sharp(PORTRAIT).resize(512, 512, { fit: 'cover' }).ensureAlpha().raw().toBuffer();
  const rig = await detectFaceRig(
    await sharp(data, { raw: { width: 512, height: 512, channels: 4 } })
      .png()
      .toBuffer(),
  );
  return { frame: { width: 512, height: 512, data: new Uint8Array(data) }, rig };
}

/**
 * Every lip-sync engine side by side on the same live frames: the CPU, and CUDA too on a GPU host
 * (RENDER_DEVICE=cuda); an operator's own model too when LIPSYNC_MODEL names one.
 */
async function benchEngines(seconds: number) {
  const { frame, rig } = await frame512();
  const cuda = process.env.RENDER_DEVICE === 'cuda';
  const own = parseLipSyncChoice(process.env.LIPSYNC_MODEL);
  return benchLipSyncByDevice(
    { i420: rgbaToI420(frame.data, 512, 512), width: 512, height: 512, rig },
    {
      engines: {
        builtin: 'builtin',
        'neural (tiny_wav2lip.onnx)': TINY_WAV2LIP,
        ...(own.kind === 'onnx' ? { [`neural (${path.basename(own.path)})`]: own.path } : {}),
      },
      devices: cuda ? ['cpu', 'cuda'] : ['cpu'],
      batches: cuda ? [1, 8, 32, 128] : [1, 8],
      seconds,
      threads: 1,
    },
  );
}

/** The way before: each item's lip-sync region out of I420 into `scratch` (RGBA), drawn there in one batch, and back. */
async function renderViaRgba(
  engine: LipSyncEngine,
  items: readonly LipSyncI420Item[],
  scratch: Uint8Array[],
): Promise<void> {
  const regions = items.map((it) => chromaAligned(lipSyncRegion(it.face), it.width, it.height));
  items.forEach((it, i) => i420RectToRgba(it.i420, it.width, it.height, regions[i]!, scratch[i]!));
  await engine.renderFrames(
    items.map((it, i) => ({
      frame: { data: scratch[i]!, width: it.width, height: it.height },
      face: it.face,
      shape: it.shape,
      target: scratch[i]!,
    })),
  );
  items.forEach((it, i) => rgbaRectToI420(scratch[i]!, it.width, it.height, regions[i]!, it.i420));
}

/**
 * A live call's frames (I420, drawn in place), batch of 8, one thread: drawn on the I420 planes
 * themselves beside the way before (the lip-sync region converted to RGBA, drawn, converted back).
 * Rounds alternate between the two; each figure is the best round.
 */
async function benchLiveI420(seconds: number) {
  const { frame, rig } = await frame512();
  const source = rgbaToI420(frame.data, 512, 512);
  const engine = await createLipSync('builtin', { intraOpNumThreads: 1 });
  try {
    const face = engine.prepare(rig);
    const items: LipSyncI420Item[] = Array.from({ length: 8 }, (_, i) => ({
      i420: new Uint8Array(i420Size(512, 512)),
      width: 512,
      height: 512,
      face,
      shape: { open: 0.3 + 0.1 * (i % 6), wide: 0.1, round: 0 },
    }));
    const scratch = items.map(() => new Uint8Array(512 * 512 * 4));
    const ways = {
      i420: () => engine.renderI420(items),
      viaRgba: () => renderViaRgba(engine, items, scratch),
    };
    const best = { i420: Infinity, viaRgba: Infinity };
    for (let round = 0; round < 6; round++) {
      for (const [name, draw] of Object.entries(ways) as [keyof typeof ways, () => Promise<void>][]) {
        const ms = await msPer(
          async () => {
            for (const it of items) it.i420.set(source);
            await draw();
          },
          seconds / 12,
          items.length,
        );
        best[name] = Math.min(best[name], ms);
      }
    }
    return { i420MsPerFrame: best.i420, viaRgbaMsPerFrame: best.viaRgba, ratio: best.i420 / best.viaRgba };
  } finally {
    await engine.release();
  }
}

/**
 * The mouth's cost, this graph beside the previous one (render/synth/fixtures/mouth_synth_v1.onnx),
 * on the same frames and sounds (each graph its own viseme table), one thread: a live call's I420
 * frames in batches of 8 (the live path), RGBA frames in batches of 8 (a render's path: POST /lipsync
 * draws 8 at a time, `npm run render` 8; an HTTP turn 1, 2, then 4) and single RGBA frames
 * (a turn's first frame). The two take
 * turns call by call (which goes first alternates), so a busy moment of the machine falls on both;
 * each figure is the median of its calls, the ratio that of the medians. `againstModel`, another build
 * of this graph's contract (say, an earlier commit's), joins the turns with the current viseme table.
 */
async function benchMouthBeforeAfter(seconds: number, againstModel?: string) {
  const { frame, rig } = await frame512();
  const source = rgbaToI420(frame.data, 512, 512);
  const sounds: Viseme[] = ['aa', 'E', 'nn', 'oh', 'ih', 'DD', 'ou', 'FF'];
  const graphs = [
    {
      name: 'current',
      synth: await createMouthSynth({ intraOpNumThreads: 1 }),
      shape: speakingShape,
      live: [] as number[],
      render: [] as number[],
      single: [] as number[],
    },
    {
      name: 'previous',
      synth: await createMouthSynth({ modelPath: PREVIOUS_SYNTH_MODEL, intraOpNumThreads: 1 }),
      shape: previousShape,
      live: [] as number[],
      render: [] as number[],
      single: [] as number[],
    },
    ...(againstModel
      ? [
          {
            name: 'against',
            synth: await createMouthSynth({ modelPath: againstModel, intraOpNumThreads: 1 }),
            shape: speakingShape,
            live: [] as number[],
            render: [] as number[],
            single: [] as number[],
          },
        ]
      : []),
  ];
  try {
    const face = prepareFaceForSynth(rig);
    const frames = sounds.map(() => ({ width: 512, height: 512, data: new Uint8Array(i420Size(512, 512)) }));
    const target = new Uint8Array(frame.data.length);
    const targets = sounds.map(() => new Uint8Array(frame.data.length));
    const timed = async (fn: () => Promise<unknown>) => {
      const t0 = performance.now();
      await fn();
      return performance.now() - t0;
    };
    const until = performance.now() + seconds * 1000;
    for (let i = 0; i < 20 || performance.now() < until; i++) {
      for (const g of i % 2 ? graphs : [...graphs].reverse()) {
        for (const f of frames) f.data.set(source);
        const live = await timed(() =>
          g.synth.renderI420Frames(
            frames.map((f, j) => ({ frame: f, face, shape: g.shape(sounds[(i + j) % sounds.length]!) })),
          ),
        );
        const render = await timed(() =>
          g.synth.renderFrames(
            targets.map((t, j) => ({ frame, face, shape: g.shape(sounds[(i + j) % sounds.length]!), target: t })),
          ),
        );
        const single = await timed(() => g.synth.renderFrame(frame, face, g.shape(sounds[i % sounds.length]!), target));
        if (i < 4) continue; // the first calls warm up
        g.live.push(live / frames.length);
        g.render.push(render / targets.length);
        g.single.push(single);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const [cur, prev, other] = graphs.map((g) => ({
      live: median(g.live),
      render: median(g.render),
      single: median(g.single),
    }));
    return {
      current: cur!,
      previous: prev!,
      liveRatio: cur!.live / prev!.live,
      renderRatio: cur!.render / prev!.render,
      singleRatio: cur!.single / prev!.single,
      calls: graphs[0]!.live.length,
      ...(other && againstModel
        ? {
            against: {
              model: againstModel,
              ...other,
              liveRatio: cur!.live / other.live,
              renderRatio: cur!.render / other.render,
              singleRatio: cur!.single / other.single,
            },
          }
        : {}),
    };
  } finally {
    for (const g of graphs) await g.synth.release();
  }
}

/**
 * Audio to the first lip-synced frame.
 * - Given audio: the viseme model needs LOOKAHEAD of audio past a frame before that frame is final,
 *   so latency = the audio that must arrive (algorithmic) + compute for the first frame.
 * - Text (a turn in repeat mode): text in, first sentence synthesized, its visemes, first frame synthesized.
 */
async function benchFirstFrame() {
  const { frame, rig } = await frame512();
  const synth = await createMouthSynth({ intraOpNumThreads: 1 });
  const face = prepareFaceForSynth(rig);
  await warmUpTts();
  await warmUpAudioVisemes();
  await synth.renderFrame(frame, face, { open: 0.4, wide: 0, round: 0 });
  try {
    const textRuns: number[] = [];
    for (let r = 0; r < 5; r++) {
      const t0 = performance.now();
      const stream = synthesizeStream({ text: 'Hello there, how are you today? I am glad you asked.' });
      const first = await stream.next();
      if (first.done) throw new Error('no speech');
      const track = visemeTrack(first.value.phones, 25, { durationSeconds: first.value.durationSeconds });
      await synth.renderFrame(frame, face, track.frames[0]!);
      textRuns.push(performance.now() - t0);
      await stream.return(undefined);
    }
    // Audio path: 20 ms chunks of speech-like audio arrive in real time; count the audio needed and the compute.
    const audioRuns: { audioMs: number; computeMs: number }[] = [];
    for (let r = 0; r < 5; r++) {
      const s = new AudioVisemeStream({ sampleRate: 16000, fps: 25 });
      let fed = 0;
      let compute = 0;
      for (;;) {
        const chunk = new Float32Array(320).map((_, i) => Math.sin((fed + i) / 9) * 0.4);
        fed += chunk.length;
        const t0 = performance.now();
        const frames = await s.push(chunk);
        if (frames.length > 0) {
          await synth.renderFrame(frame, face, frames[0]!);
          compute += performance.now() - t0;
          break;
        }
        compute += performance.now() - t0;
      }
      audioRuns.push({ audioMs: (fed / 16000) * 1000, computeMs: compute });
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    return {
      textToFirstFrameMs: median(textRuns),
      audioBufferedBeforeFirstFrameMs: median(audioRuns.map((r) => r.audioMs)),
      audioComputeToFirstFrameMs: median(audioRuns.map((r) => r.computeMs)),
    };
  } finally {
    await synth.release();
    await closeTts();
  }
}

export const render: BenchModule = {
  name: 'render',
  description:
    'lip-sync synthesis per core at 512x512, the mouth beside the previous graph, the engines side by side (CUDA too with RENDER_DEVICE=cuda), audio-to-first-frame latency, 5 s clip generation; each beside a JPEG encode',
  async run({ flags }): Promise<BenchReport> {
    const seconds = Number(flags.seconds ?? 2);
    const synthFig = await benchSynth({ seconds });
    const engines = await benchEngines(seconds / 2);
    const mouth = await benchMouthBeforeAfter(seconds * 2, flags['mouth-against']);
    const live = await benchLiveI420(seconds * 2);
    const first = await benchFirstFrame();
    const gen = await benchGenerate();
    const jpeg = synthFig.msJpegEncode;
    const f = (x: number) => x.toFixed(2);
    const lines = [
      `JPEG encode of one 512x512 frame (sharp, q80, 1 thread), same run: ${f(jpeg)} ms`,
      '',
      'built-in lip-sync synthesis, ms per 512x512 frame on one core (crop + ONNX graph + composite):',
      ...synthFig.cases.map(
        (c) =>
          `  crop S=${c.cropSize}: ` +
          Object.entries(c.msPerFrame)
            .map(([n, ms]) => `batch ${n}: ${f(ms)} ms (${(1000 / ms).toFixed(0)} fps/core, x${f(ms / jpeg)} JPEG)`)
            .join('; '),
      ),
      `  target: <= ${synthFig.targetMs} ms per frame per core`,
      '',
      `the mouth, this graph beside the previous one (render/synth/fixtures/mouth_synth_v1.onnx), same frames and sounds, taking turns (${mouth.calls} calls each), median ms per frame, one thread:`,
      `  a live call's I420 frames, batch 8: ${f(mouth.current.live)} against ${f(mouth.previous.live)}, ratio ${f(mouth.liveRatio)}`,
      `  a render's RGBA frames, batch 8: ${f(mouth.current.render)} against ${f(mouth.previous.render)}, ratio ${f(mouth.renderRatio)}`,
      `  single RGBA frames (a turn's first): ${f(mouth.current.single)} against ${f(mouth.previous.single)}, ratio ${f(mouth.singleRatio)}`,
      '  target: ratio <= 1.25',
      ...(mouth.against
        ? [
            `  beside ${mouth.against.model} (the same turns): live batch 8 ${f(mouth.against.live)}, ratio ${f(mouth.against.liveRatio)}; render batch 8 ${f(mouth.against.render)}, ratio ${f(mouth.against.renderRatio)}; single ${f(mouth.against.single)}, ratio ${f(mouth.against.singleRatio)}`,
          ]
        : []),
      '',
      "lip-sync engines side by side, a live call's I420 frames drawn in place, ms per frame, one thread (the synthesis graph's run alone in brackets):",
      ...engines.rows.map(
        (r) =>
          `  ${r.engine} on ${r.device}, batch ${r.batch}: ${f(r.msPerFrame)}` +
          (r.graphMsPerFrame === undefined ? '' : ` (graph ${f(r.graphMsPerFrame)})`),
      ),
      ...engines.agreement.map(
        (a) =>
          `  ${a.engine}, CUDA against the CPU: largest difference ${a.maxDiff}/255, ${a.bytesOver2} bytes off by more than 2`,
      ),
      '',
      `a live call's I420 frames drawn in place, batch 8, ms per frame: on the I420 planes ${f(live.i420MsPerFrame)}, ` +
        `via an RGBA region (converted both ways) ${f(live.viaRgbaMsPerFrame)}, ratio ${f(live.ratio)}`,
      '',
      'audio to first lip-synced frame:',
      `  text (repeat mode: TTS first sentence + visemes + first frame): ${f(first.textToFirstFrameMs)} ms`,
      `  given audio: ${f(first.audioBufferedBeforeFirstFrameMs)} ms of audio must arrive (viseme look-ahead), then ${f(first.audioComputeToFirstFrameMs)} ms compute`,
      '  target: <= 80 ms',
      '',
      `generation of a 5 s clip at ${gen.size}x${gen.size}, ${gen.fps} fps (${gen.frames} frames): ${f(gen.renderMs / 1000)} s, ` +
        `${f(gen.renderMsPerFrame)} ms/frame (${gen.renderFramesPerSecond.toFixed(0)} fps), x${f(gen.renderMsPerFrame / gen.jpegEncodeMsPerFrame)} a JPEG encode (${f(gen.jpegEncodeMsPerFrame)} ms) measured with it`,
    ];
    return {
      results: { synth: synthFig, mouth, engines, liveI420: live, firstFrame: first, generate: gen },
      table: lines.join('\n'),
      failures: [],
    };
  },
};
