import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { readAvatarMux } from '../../client/index.ts';
import type { AvatarMuxRecord, MuxHeader, MuxVideoFrame } from '../../client/index.ts';
import { i420Size, i420ToRgba, rgbaToI420 } from './frames.ts';
import { AvatarMuxWriter, encodeJpeg, framePts } from './index.ts';

async function decodeAll(parts: Uint8Array[]): Promise<AvatarMuxRecord[]> {
  const out: AvatarMuxRecord[] = [];
  for await (const r of readAvatarMux(
    (async function* () {
      yield* parts;
    })(),
  ))
    out.push(r);
  return out;
}

function gradient(w: number, h: number): Uint8Array {
  const f = new Uint8Array(w * h * 4);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) f.set([(x * 255) / (w - 1), (y * 255) / (h - 1), 128, 255], (y * w + x) * 4);
  }
  return f;
}

describe('AvatarMuxWriter with real frames', () => {
  it('carries JPEG frames (sharp) and I420 frames that decode back to the picture', async () => {
    const [w, h] = [64, 48];
    const rgba = gradient(w, h);
    const mux = new AvatarMuxWriter({
      tracks: [
        { kind: 'audio', sampleRate: 16000 },
        { kind: 'video', codec: 'jpeg', width: w, height: h, fps: 25 },
        { kind: 'video', codec: 'i420', width: w, height: h, fps: 25 },
      ],
      metadata: { avatar_id: 'ava_123' },
    });
    const parts = [
      mux.start(),
      mux.audio(new Int16Array(640)),
      mux.video(await encodeJpeg(rgba, w, h, { quality: 90 }), { track: 1 }),
    ];
    parts.push(mux.video(rgbaToI420(rgba, w, h), { track: 2 }), mux.end());
    const recs = await decodeAll(parts);
    const header = recs[0] as MuxHeader;
    expect(header.tracks).toEqual([
      { id: 0, kind: 'audio', codec: 'pcm_s16le', codecId: 1, sampleRate: 16000, channels: 1 },
      { id: 1, kind: 'video', codec: 'jpeg', codecId: 1, width: w, height: h, fps: 25, fpsNum: 25, fpsDen: 1 },
      { id: 2, kind: 'video', codec: 'i420', codecId: 2, width: w, height: h, fps: 25, fpsNum: 25, fpsDen: 1 },
    ]);
    expect(header.metadata).toEqual({ avatar_id: 'ava_123' });
    const [jpeg, i420] = recs.filter((r): r is MuxVideoFrame => r.type === 'video');
    const { data, info } = await sharp(jpeg!.data).raw().toBuffer({ resolveWithObject: true });
    expect([info.width, info.height, info.channels]).toEqual([w, h, 3]);
    const back = i420ToRgba(i420!.data, w, h);
    for (const [x, y] of [
      [5, 5],
      [32, 24],
      [60, 40],
    ] as const) {
      const o = y * w + x;
      for (let k = 0; k < 3; k++) {
        expect(Math.abs(data[o * 3 + k]! - rgba[o * 4 + k]!)).toBeLessThanOrEqual(8);
        expect(Math.abs(back[o * 4 + k]! - rgba[o * 4 + k]!)).toBeLessThanOrEqual(8);
      }
    }
  });

  it('places frames on the sample clock, skips slots on request and defaults events to the audio position', async () => {
    const mux = new AvatarMuxWriter({
      tracks: [
        { kind: 'audio', sampleRate: 24000 },
        { kind: 'video', codec: 'i420', width: 2, height: 2, fps: 25 },
      ],
    });
    const frame = new Uint8Array(i420Size(2, 2));
    const parts = [
      mux.start(),
      mux.video(frame),
      mux.audio(new Int16Array(960)),
      mux.event('speech_start', { text: 'hi' }),
    ];
    parts.push(
      mux.video(frame),
      mux.video(frame, { frame: 5 }),
      mux.video(frame),
      mux.event('viseme', { v: 'AA' }, { pts: 100, durationSamples: 480 }),
    );
    parts.push(mux.end());
    const recs = await decodeAll(parts);
    const frames = recs.filter((r): r is MuxVideoFrame => r.type === 'video');
    expect(frames.map((f) => f.pts)).toEqual([0, 960, 4800, 5760]);
    expect(frames.map((f) => f.index)).toEqual([0, 1, 2, 3]);
    expect(recs.filter((r) => r.type === 'event')).toEqual([
      { type: 'event', name: 'speech_start', pts: 960, time: 0.04, durationSamples: 0, data: { text: 'hi' } },
      { type: 'event', name: 'viseme', pts: 100, time: 100 / 24000, durationSamples: 480, data: { v: 'AA' } },
    ]);
    // Video ran past the audio: the end covers the last frame.
    expect(recs.at(-1)).toMatchObject({ type: 'end', durationSamples: 5760 });
    expect(framePts(3, 48000, 30000, 1001)).toBe(4805);
  });

  it('refuses misuse with clear messages', () => {
    const mk = () =>
      new AvatarMuxWriter({
        tracks: [
          { kind: 'audio', sampleRate: 16000, channels: 2 },
          { kind: 'video', codec: 'jpeg', width: 8, height: 8, fps: 25 },
        ],
      });
    expect(() => mk().audio(new Int16Array(2))).toThrow(/start\(\) first/);
    const m = mk();
    m.start();
    expect(() => m.start()).toThrow(/already/);
    expect(() => m.audio(new Uint8Array(6))).toThrow(/whole number of 2-channel samples/);
    expect(() => m.video(new Uint8Array(100))).toThrow(/JPEG bytes/);
    expect(() => m.video(new Uint8Array([0xff, 0xd8, 0, 0]), { track: 0 })).toThrow(/not a video track/);
    m.video(new Uint8Array([0xff, 0xd8, 0, 0]), { frame: 3 });
    expect(() => m.video(new Uint8Array([0xff, 0xd8, 0, 0]), { frame: 2 })).toThrow(/does not increase/);
    expect(() => m.event('')).toThrow(/1 to 255 bytes/);
    m.end();
    expect(() => m.audio(new Int16Array(2))).toThrow(/closed/);
    expect(() => m.error('x', 'y')).toThrow(/closed/);
    expect(() => new AvatarMuxWriter({ tracks: [{ kind: 'audio', sampleRate: 16000 }], clockRate: 48000 })).toThrow(
      /clock rate/,
    );
    expect(
      () => new AvatarMuxWriter({ tracks: [{ kind: 'video', codec: 'jpeg', width: 8, height: 8, fps: 25 }] }),
    ).toThrow(/clockRate is required/);
  });

  it('supports a video-only stream on an explicit clock, and opus packets with their sample counts', async () => {
    const v = new AvatarMuxWriter({
      clockRate: 90000,
      tracks: [{ kind: 'video', codec: 'i420', width: 2, height: 2, fps: 30 }],
    });
    const f = new Uint8Array(6);
    const recs = await decodeAll([v.start(), v.video(f), v.video(f), v.end()]);
    expect(recs.filter((r) => r.type === 'video').map((r) => (r as MuxVideoFrame).pts)).toEqual([0, 3000]);
    expect(recs.at(-1)).toMatchObject({ durationSamples: 6000 });

    const o = new AvatarMuxWriter({ tracks: [{ kind: 'audio', codec: 'opus', sampleRate: 48000, channels: 1 }] });
    const orecs = await decodeAll([
      o.start(),
      o.audio(new Uint8Array([0xf8, 1, 2]), { sampleCount: 960 }),
      o.audio(new Uint8Array([0xf8, 3]), { sampleCount: 960 }),
      o.end(),
    ]);
    expect(
      orecs.filter((r) => r.type === 'audio').map((r) => [r.type === 'audio' && r.pts, r.type === 'audio' && r.codec]),
    ).toEqual([
      [0, 'opus'],
      [960, 'opus'],
    ]);
  });
});
