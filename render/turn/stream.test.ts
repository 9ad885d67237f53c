/** The streaming turn renderer against the real TTS, lip-sync engine and frame cache, decoded by the real client reader. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  readAvatarMux,
  type AvatarMuxRecord,
  type MuxAudioChunk,
  type MuxEvent,
  type MuxVideoFrame,
} from '../../client/index.ts';
import { framePts } from '../encode/index.ts';
import { openFrameCache, type FrameCache } from '../framecache/index.ts';
import { generateIdleLoop, preparePortrait, writeMotion } from '../generate/index.ts';
import { ASTRONAUT } from '../generate/test-helpers.ts';
import { createLipSync, type LipSyncEngine } from '../lipsync/index.ts';
import { closeTts, synthesizeStream, type SynthesisChunk } from '../tts/index.ts';
import { frameCacheBody } from './body.ts';
import { TurnStream, type SpeechChunk, type TurnChunk } from './stream.ts';

const tmp = mkdtempSync(join(tmpdir(), 'turn-stream-'));
let cache: FrameCache;
let lipsync: LipSyncEngine;

beforeAll(async () => {
  const idle = await generateIdleLoop(await preparePortrait(ASTRONAUT, { width: 256 }), {
    seconds: 2,
    fps: 25,
    seed: 5,
  });
  await writeMotion(idle, { cacheDir: join(tmp, 'loop') });
  cache = await openFrameCache(join(tmp, 'loop'));
  lipsync = await createLipSync('builtin');
}, 120_000);
afterAll(async () => {
  await lipsync?.release();
  await closeTts();
  rmSync(tmp, { recursive: true, force: true });
});

const describeError = (err: unknown) => ({
  code: 'upstream_unreachable',
  message: err instanceof Error ? err.message : String(err),
  retryable: true,
});

/** The speech, recording every chunk handed to the renderer. */
async function* recorded(source: AsyncIterable<SynthesisChunk>, into: SynthesisChunk[]): AsyncGenerator<SpeechChunk> {
  for await (const c of source) {
    into.push(c);
    yield c;
  }
}

async function decode(chunks: TurnChunk[]): Promise<AvatarMuxRecord[]> {
  // Split the bytes at odd places: the reader must not care where chunks end.
  const all = Buffer.concat(chunks.map((c) => c.bytes));
  const pieces: Uint8Array[] = [];
  for (let i = 0; i < all.length; i += 7919) pieces.push(all.subarray(i, i + 7919));
  const out: AvatarMuxRecord[] = [];
  for await (const r of readAvatarMux(
    (async function* () {
      yield* pieces;
    })(),
  ))
    out.push(r);
  return out;
}

async function collect(turn: TurnStream): Promise<TurnChunk[]> {
  const chunks: TurnChunk[] = [];
  for await (const c of turn.chunks()) chunks.push(c);
  return chunks;
}

async function meanDiff(
  a: Uint8Array,
  b: Uint8Array,
  box?: { left: number; top: number; width: number; height: number },
): Promise<number> {
  const raw = async (j: Uint8Array) => {
    let s = sharp(j);
    if (box) s = s.extract(box);
    return s.removeAlpha().raw().toBuffer();
  };
  const [x, y] = await Promise.all([raw(a), raw(b)]);
  let d = 0;
  for (let i = 0; i < x.length; i++) d += Math.abs(x[i]! - y[i]!);
  return d / x.length;
}

describe('turn stream', () => {
  it('speaks the sentences on the audio clock: every frame on the grid, audio before its frames, mouth drawn only while speaking', async () => {
    const spoken: SynthesisChunk[] = [];
    const body = frameCacheBody(cache, lipsync);
    const startFrame = 37;
    const turn = new TurnStream({
      body,
      startFrame,
      lipsync,
      speech: recorded(synthesizeStream({ text: 'Hello there. How are you doing today?', voice: 'slt' }), spoken),
      sampleRate: 16000,
      metadata: { turn_id: 't1' },
      describeError,
    });
    const chunks = await collect(turn);
    expect(chunks[0]!.audioSamples).toBe(0); // the header, before any speech
    const records = await decode(chunks);

    const header = records[0]!;
    expect(header).toMatchObject({ type: 'header', clockRate: 16000, metadata: { turn_id: 't1' } });
    if (header.type !== 'header') throw new Error('no header');
    expect(header.tracks).toMatchObject([
      { kind: 'audio', codec: 'pcm_s16le', sampleRate: 16000, channels: 1 },
      { kind: 'video', codec: 'jpeg', width: 256, height: 256, fps: 25 },
    ]);

    const speech = Int16Array.from(spoken.flatMap((c) => [...c.samples]));
    const audio = records.filter((r): r is MuxAudioChunk => r.type === 'audio');
    const pcm = Int16Array.from(audio.flatMap((a) => [...a.pcm!]));
    expect(pcm.length).toBe(speech.length);
    expect(Buffer.from(pcm.buffer).equals(Buffer.from(speech.buffer))).toBe(true);

    const frames = records.filter((r): r is MuxVideoFrame => r.type === 'video');
    const expectedFrames = Math.ceil((speech.length * 25) / 16000);
    expect(frames.length).toBe(expectedFrames);
    frames.forEach((f, k) => expect(f.pts).toBe(framePts(k, 16000, 25, 1)));
    // Audio first: when frame k arrives, its audio (up to the next frame, or the end) has arrived.
    let heard = 0;
    for (const r of records) {
      if (r.type === 'audio') heard += r.sampleCount;
      if (r.type === 'video')
        expect(heard).toBeGreaterThanOrEqual(Math.min(framePts(r.index + 1, 16000, 25, 1), speech.length));
    }
    const end = records[records.length - 1]!;
    expect(end).toMatchObject({ type: 'end', durationSamples: speech.length });

    const events = records.filter((r): r is MuxEvent => r.type === 'event');
    expect(events.filter((e) => e.name === 'speech_start').map((e) => (e.data as { text: string }).text)).toEqual([
      'Hello there.',
      'How are you doing today?',
    ]);
    expect(events.some((e) => e.name === 'viseme' && (e.data as { viseme: string }).viseme === 'aa')).toBe(true);
    expect(turn.stats).toMatchObject({ outcome: 'end', audioSamples: speech.length, frames: expectedFrames });
    expect(turn.stats.sentences[1]).toMatchObject({ startSample: spoken[0]!.samples.length, endSample: speech.length });

    // Silent frames (Flite starts with a pause) are the loop's stored JPEGs, byte for byte, from the cursor on;
    // speaking frames are drawn: they differ from the stored frame at the mouth, not elsewhere.
    expect(Buffer.from(frames[0]!.data).equals(Buffer.from(cache.encoded(startFrame)))).toBe(true);
    expect(turn.stats.drawnFrames).toBeGreaterThan(expectedFrames / 2);
    expect(turn.stats.drawnFrames).toBeLessThan(expectedFrames);
    const stored = (k: number) => cache.encoded((startFrame + k) % cache.frameCount);
    const drawn = frames.filter((f) => !Buffer.from(f.data).equals(Buffer.from(stored(f.index))));
    expect(drawn.length).toBe(turn.stats.drawnFrames);
    const [mx, my, mw, mh] = cache.manifest.mouthBoxes[(startFrame + drawn[10]!.index) % cache.frameCount]!;
    const mouth = { left: Math.floor(mx), top: Math.floor(my), width: Math.ceil(mw), height: Math.ceil(mh) };
    const open = [...drawn].sort((a, b) => b.data.length - a.data.length).slice(0, 5);
    let mouthDiff = 0;
    for (const f of open) mouthDiff = Math.max(mouthDiff, await meanDiff(f.data, stored(f.index), mouth));
    const corner = await meanDiff(open[0]!.data, stored(open[0]!.index), { left: 0, top: 0, width: 48, height: 48 });
    expect(mouthDiff).toBeGreaterThan(4 * corner + 2);
  }, 60_000);

  it('cuts speech past maxSamples and says so', async () => {
    const turn = new TurnStream({
      body: frameCacheBody(cache, lipsync),
      startFrame: 0,
      lipsync,
      speech: synthesizeStream({ text: 'This sentence runs on for quite a while, longer than the limit allows.' }),
      sampleRate: 16000,
      maxSamples: 16000,
      describeError,
    });
    const records = await decode(await collect(turn));
    expect(records[records.length - 1]).toMatchObject({ type: 'end', durationSamples: 16000 });
    expect(records.filter((r) => r.type === 'video')).toHaveLength(25);
    expect(records.some((r) => r.type === 'event' && r.name === 'truncated')).toBe(true);
    expect(turn.stats.outcome).toBe('truncated');
  }, 60_000);

  it('ends with the ERROR record when the speech source fails, after the media of what was spoken', async () => {
    async function* failing(): AsyncGenerator<SpeechChunk> {
      for await (const c of synthesizeStream({ text: 'First sentence. Second sentence.' })) {
        yield c;
        throw new Error('the LLM stream broke');
      }
    }
    const turn = new TurnStream({
      body: frameCacheBody(cache, lipsync),
      startFrame: 0,
      lipsync,
      speech: failing(),
      sampleRate: 16000,
      describeError,
    });
    const records = await decode(await collect(turn));
    const last = records[records.length - 1]!;
    expect(last).toMatchObject({
      type: 'error',
      code: 'upstream_unreachable',
      message: 'the LLM stream broke',
      retryable: true,
    });
    const first = turn.stats.sentences[0]!;
    expect(turn.stats.sentences).toHaveLength(1);
    // Frames whose audio is complete went out; the one spanning the failure did not.
    expect(records.filter((r) => r.type === 'video')).toHaveLength(Math.floor((first.endSample * 25) / 16000));
    expect(turn.stats.outcome).toBe('error');
  }, 60_000);

  it('stops rendering and stops its speech source when the consumer leaves', async () => {
    let finished = false;
    let pulled = 0;
    async function* speech(): AsyncGenerator<SpeechChunk> {
      try {
        for await (const c of synthesizeStream({ text: 'One. Two. Three. Four. Five. Six. Seven. Eight.' })) {
          pulled++;
          yield c;
        }
      } finally {
        finished = true;
      }
    }
    const turn = new TurnStream({
      body: frameCacheBody(cache, lipsync),
      startFrame: 0,
      lipsync,
      speech: speech(),
      sampleRate: 16000,
      describeError,
    });
    let frames = 0;
    for await (const c of turn.chunks()) {
      frames += c.videoFrames;
      if (frames >= 3) break;
    }
    expect(finished).toBe(true);
    expect(pulled).toBe(1);
    expect(turn.stats).toMatchObject({ outcome: 'stopped', frames: 3 });
  }, 60_000);

  it('drives a neural lip-sync model (mel windows of the speech, 8 kHz speech resampled) on every frame', async () => {
    const neural = await createLipSync(fileURLToPath(new URL('../models/lipsync/tiny_wav2lip.onnx', import.meta.url)));
    try {
      const spoken: SynthesisChunk[] = [];
      const turn = new TurnStream({
        body: frameCacheBody(cache, neural),
        startFrame: 3,
        lipsync: neural,
        speech: recorded(synthesizeStream({ text: 'Good morning. Nice day.', voice: 'kal' }), spoken),
        sampleRate: 8000,
        describeError,
      });
      const records = await decode(await collect(turn));
      const samples = spoken.reduce((n, c) => n + c.samples.length, 0);
      const frames = records.filter((r): r is MuxVideoFrame => r.type === 'video');
      expect(records[0]).toMatchObject({ type: 'header', clockRate: 8000 });
      expect(frames.length).toBe(Math.ceil((samples * 25) / 8000));
      frames.forEach((f, k) => expect(f.pts).toBe(framePts(k, 8000, 25, 1)));
      // The model draws every frame (it decides from the audio what the mouth does).
      expect(turn.stats.drawnFrames).toBe(frames.length);
      expect(records[records.length - 1]).toMatchObject({ type: 'end', durationSamples: samples });
    } finally {
      await neural.release();
    }
  }, 60_000);
});
