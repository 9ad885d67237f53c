/**
 * A live call's frames through a neural model in a lip-sync thread: each frame carries the audio it
 * plays with on a SharedArrayBuffer, the thread computes its mel window from it and draws the lower
 * face into the call's own I420 buffer in place; a frame in silence is published as the clip has it.
 */
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { i420Size, rgbaToI420 } from '../../render/encode/index.ts';
import {
  createLipSync,
  createLipSyncThread,
  frameAudioSpan,
  melWindowOfAudio,
  type FrameAudio,
  type LipSyncEngine,
} from '../../render/lipsync/index.ts';
import { detectFaceRig, type FaceRig } from '../../render/rig/index.ts';
import { portraitFrame } from '../../render/synth/examples/make-stills.ts';
import type { BodyFrame } from './body.ts';
import type { ClipMedia } from './media.ts';
import { BatchRenderer, type FrameJob } from './renderer.ts';

const MODEL = fileURLToPath(new URL('../../render/lipsync/fixtures/wav2lip_reference.onnx', import.meta.url));
const SR = 24_000;
const FPS = 25;

let source: Uint8Array;
let rig: FaceRig;
let threaded: LipSyncEngine;
let inProcess: LipSyncEngine;

beforeAll(async () => {
  const frame = await portraitFrame('grace_hopper');
  rig = await detectFaceRig(
    await sharp(frame.data, { raw: { width: 512, height: 512, channels: 4 } })
      .png()
      .toBuffer(),
  );
  source = rgbaToI420(frame.data, 512, 512);
  [threaded, inProcess] = await Promise.all([createLipSyncThread(MODEL), createLipSync(MODEL)]);
}, 120_000);

afterAll(async () => {
  await Promise.all([threaded?.release(), inProcess?.release()]);
});

/** A clip of one frame, the portrait, as the worker's media cache gives it. */
function clip(engine: LipSyncEngine): ClipMedia {
  const face = engine.prepare(rig);
  return {
    key: 'portrait',
    frameCount: 1,
    width: 512,
    height: 512,
    i420: async () => source,
    face: () => face,
  } as Partial<ClipMedia> as ClipMedia;
}

/** A call's timeline of speech at 24 kHz: a voice-like tone at `hz`, and frame k's audio of it in a shared buffer. */
function frameAudio(k: number, hz: number): FrameAudio {
  const { start, length } = frameAudioSpan(k, FPS, SR);
  const pcm = new Int16Array(new SharedArrayBuffer(2 * length));
  for (let j = 0; j < length; j++) {
    const t = (start + j) / SR;
    pcm[j] =
      t < 0 ? 0 : Math.round(9000 * Math.sin(2 * Math.PI * hz * t) * (0.6 + 0.4 * Math.sin(2 * Math.PI * 4 * t)));
  }
  return { pcm, sampleRate: SR, frame: k, fps: FPS };
}

function job(media: ClipMedia, audio: FrameAudio | null): FrameJob {
  const body: BodyFrame = { media, index: 0, clipId: 'source', kind: 'idle' } as BodyFrame;
  return { body, shape: null, audio, target: new Uint8Array(new SharedArrayBuffer(i420Size(512, 512))) };
}

describe("a neural model's live frames", () => {
  it(
    'get the mel window of the audio they play with, computed and drawn in the lip-sync thread, in place; silence is left as the clip has it',
    { timeout: 60_000 },
    async () => {
      const renderer = new BatchRenderer(threaded);
      const media = clip(threaded);
      const audios = [frameAudio(40, 180), frameAudio(41, 2200)];
      const jobs = [job(media, audios[0]!), job(media, null), job(media, audios[1]!)];
      const out = await renderer.render(jobs);
      // Drawn into the call's own buffers; the frame in silence is the clip's, uncopied.
      expect(out[0]).toBe(jobs[0]!.target);
      expect(out[1]).toBe(source);
      expect(out[2]).toBe(jobs[2]!.target);
      expect(renderer.stats).toMatchObject({ frames: 3, drawn: 2 });
      // Exactly what the engine draws given each frame's mel window of that audio.
      for (const i of [0, 2]) {
        const expected = Uint8Array.from(source);
        const audio = audios[i === 0 ? 0 : 1]!;
        await inProcess.renderI420([
          {
            i420: expected,
            width: 512,
            height: 512,
            face: media.face(0),
            shape: { open: 0, wide: 0, round: 0 },
            mel: melWindowOfAudio(audio),
          },
        ]);
        expect(Buffer.compare(Buffer.from(out[i]!), Buffer.from(expected)), `frame ${i}`).toBe(0);
        expect(Buffer.compare(Buffer.from(out[i]!), Buffer.from(source)), `frame ${i} drawn`).not.toBe(0);
      }
      // Other audio, another mouth.
      expect(Buffer.compare(Buffer.from(out[0]!), Buffer.from(out[2]!))).not.toBe(0);
    },
  );

  it('leaves the built-in path as it was: a shape is drawn, the audio is not read', { timeout: 60_000 }, async () => {
    const builtin = await createLipSync('builtin');
    try {
      const media = clip(builtin);
      const renderer = new BatchRenderer(builtin);
      const [atRest, speaking] = [
        job(media, frameAudio(3, 200)),
        { ...job(media, null), shape: { open: 0.6, wide: 0, round: 0 } },
      ];
      const out = await renderer.render([atRest, speaking]);
      expect(out[0]).toBe(source);
      expect(out[1]).toBe(speaking.target);
      expect(Buffer.compare(Buffer.from(out[1]!), Buffer.from(source))).not.toBe(0);
    } finally {
      await builtin.release();
    }
  });
});
