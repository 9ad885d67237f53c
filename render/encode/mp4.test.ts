import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { i420Size, rgbaToI420 } from './frames.ts';
import { FfmpegError, MP4_PIPE_HIGH_WATER, Mp4Writer, resolveFfmpegPath, writeMp4 } from './mp4.ts';

const run = promisify(execFile);
const FFPROBE = process.env.FFPROBE_PATH || 'ffprobe';
const dir = mkdtempSync(path.join(os.tmpdir(), 'mp4-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Probe {
  streams: {
    codec_type: string;
    codec_name: string;
    pix_fmt?: string;
    width?: number;
    height?: number;
    duration: string;
    start_time: string;
    sample_rate?: string;
    nb_frames?: string;
  }[];
  format: { duration: string; format_name: string };
}

async function probe(file: string): Promise<Probe> {
  const { stdout } = await run(FFPROBE, ['-v', 'error', '-show_streams', '-show_format', '-of', 'json', file]);
  return JSON.parse(stdout) as Probe;
}

/** Runs ffmpeg and returns its stdout bytes. */
function ffmpegOut(args: string[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const p = spawn(resolveFfmpegPath(), ['-v', 'error', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    p.stdout.on('data', (b: Buffer) => out.push(b));
    p.stderr.on('data', (b: Buffer) => (err += b.toString()));
    p.on('close', (code) => (code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`ffmpeg ${code}: ${err}`))));
  });
}

/** Top-level MP4 box types in file order. */
function topBoxes(file: string): string[] {
  const b = readFileSync(file);
  const out: string[] = [];
  for (let o = 0; o + 8 <= b.length;) {
    let size = b.readUInt32BE(o);
    out.push(b.toString('latin1', o + 4, o + 8));
    if (size === 1) size = Number(b.readBigUInt64BE(o + 8));
    if (size < 8) break;
    o += size;
  }
  return out;
}

function grey(w: number, h: number, level: number): Uint8Array {
  const f = new Uint8Array(w * h * 4).fill(level);
  for (let i = 3; i < f.length; i += 4) f[i] = 255;
  return f;
}

describe('Mp4Writer', () => {
  it('writes H.264 (yuv420p) + AAC with +faststart; streams end within one frame of each other', async () => {
    const file = path.join(dir, 'basic.mp4');
    const [w, h, fps, rate] = [96, 64, 25, 16000];
    const mp4 = new Mp4Writer({ path: file, width: w, height: h, fps, sampleRate: rate });
    // The whole audio first (2.3 s, not a multiple of the AAC frame), then 2 s of video: the
    // writer pads the video with its last frame to cover the audio.
    const audio = new Int16Array(Math.round(2.3 * rate));
    for (let i = 0; i < audio.length; i++) audio[i] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate));
    await mp4.writeAudio(audio);
    let maxBuffered = 0;
    for (let i = 0; i < 2 * fps; i++) {
      await mp4.writeVideoFrame(grey(w, h, (i * 5) & 255));
      maxBuffered = Math.max(maxBuffered, mp4.bufferedBytes.video);
    }
    const res = await mp4.finish();
    expect(res.videoFrames).toBe(58); // 36,800 samples = 57.5 frames of 640: rounded up, audio padded to 58
    expect(res.audioSamples).toBe(58 * 640);
    expect(Math.abs(res.videoDuration - res.audioDuration)).toBeLessThan(1 / fps);
    expect(maxBuffered).toBeLessThanOrEqual(MP4_PIPE_HIGH_WATER + w * h * 4);

    const p = await probe(file);
    const v = p.streams.find((s) => s.codec_type === 'video')!;
    const a = p.streams.find((s) => s.codec_type === 'audio')!;
    expect([v.codec_name, v.pix_fmt, v.width, v.height]).toEqual(['h264', 'yuv420p', w, h]);
    expect([a.codec_name, a.sample_rate]).toEqual(['aac', String(rate)]);
    expect(Number(v.start_time)).toBe(0);
    expect(Math.abs(Number(a.start_time))).toBeLessThan(1e-3);
    expect(Math.abs(Number(v.duration) - Number(a.duration))).toBeLessThanOrEqual(1 / fps);
    expect(Math.abs(Number(v.duration) - res.videoDuration)).toBeLessThan(1e-3);
    // +faststart: the index (moov) comes before the media (mdat).
    const boxes = topBoxes(file);
    expect(boxes.indexOf('moov')).toBeGreaterThanOrEqual(0);
    expect(boxes.indexOf('moov')).toBeLessThan(boxes.indexOf('mdat'));
  });

  it('takes I420 frames too', async () => {
    const file = path.join(dir, 'i420.mp4');
    const frame = rgbaToI420(grey(64, 64, 200), 64, 64);
    expect(frame.length).toBe(i420Size(64, 64));
    const res = await writeMp4({
      path: file,
      width: 64,
      height: 64,
      fps: 25,
      sampleRate: 16000,
      pixelFormat: 'i420',
      frames: Array.from({ length: 25 }, () => frame),
      audio: new Int16Array(16000),
    });
    expect(res).toMatchObject({ videoFrames: 25, audioSamples: 16000 });
    const p = await probe(file);
    expect(p.streams.map((s) => s.codec_name).sort()).toEqual(['aac', 'h264']);
    // Decoded luma of a flat RGB 200 frame: BT.601 limited, Y = 16 + 200 * 219/255 = 188.
    const y = await ffmpegOut(['-i', file, '-frames:v', '1', '-f', 'rawvideo', '-pix_fmt', 'yuv420p', 'pipe:1']);
    expect(Math.abs(y[64 * 32 + 32]! - 188)).toBeLessThanOrEqual(2);
  });

  it('keeps a 60 s render in sync: no drift at 29.97 fps / 44.1 kHz (1471.47 samples a frame)', async () => {
    const file = path.join(dir, 'sync60.mp4');
    const fps = { num: 30000, den: 1001 };
    const rate = 44100;
    const [w, h] = [32, 32];
    const seconds = 60;
    const nFrames = Math.round((seconds * fps.num) / fps.den); // 1798
    const markers = [1, 30, 59.5]; // seconds: a white flash and a 1 kHz beep start together
    const markerFrames = markers.map((t) => Math.ceil((t * fps.num) / fps.den)); // first frame at or after t
    // Audio marker at the flash frame's exact time on the sample clock.
    const markerSamples = markerFrames.map((f) => Math.round((f * rate * fps.den) / fps.num));
    const audio = new Int16Array(Math.round((nFrames * rate * fps.den) / fps.num));
    for (const s0 of markerSamples) {
      for (let i = 0; i < rate / 10; i++) audio[s0 + i] = Math.round(12000 * Math.sin((2 * Math.PI * 1000 * i) / rate));
    }
    const black = grey(w, h, 0);
    const white = grey(w, h, 255);
    const frames = function* () {
      for (let f = 0; f < nFrames; f++) yield markerFrames.some((m) => f >= m && f < m + 3) ? white : black;
    };
    const res = await writeMp4({
      path: file,
      width: w,
      height: h,
      fps,
      sampleRate: rate,
      frames: frames(),
      audio,
      crf: 30,
    });
    expect(res.videoFrames).toBe(nFrames);

    const p = await probe(file);
    const v = p.streams.find((s) => s.codec_type === 'video')!;
    const a = p.streams.find((s) => s.codec_type === 'audio')!;
    const frameDur = fps.den / fps.num;
    expect(Math.abs(Number(v.duration) - Number(a.duration))).toBeLessThanOrEqual(frameDur);
    expect(Math.abs(Number(v.duration) - (nFrames * fps.den) / fps.num)).toBeLessThan(1e-3);

    // Decode both tracks and find each marker: the flash (video pts) vs the beep onset (audio).
    const { stdout } = await run(
      FFPROBE,
      ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'frame=pts_time', '-of', 'json', file],
      { maxBuffer: 1 << 24 },
    );
    const pts = (JSON.parse(stdout) as { frames: { pts_time: string }[] }).frames.map((f) => Number(f.pts_time));
    const luma = await ffmpegOut([
      '-i',
      file,
      '-map',
      '0:v:0',
      '-vsync',
      '0',
      '-f',
      'rawvideo',
      '-pix_fmt',
      'gray',
      'pipe:1',
    ]);
    expect(pts.length).toBe(nFrames);
    expect(luma.length).toBe(nFrames * w * h);
    const bright = (f: number) => luma[f * w * h + (w * h) / 2 + w / 2]! > 128;
    const flashTimes = markerFrames.map((m) => {
      let f = m - 10;
      while (!bright(f)) f++;
      return pts[f]!;
    });
    const pcm = await ffmpegOut([
      '-i',
      file,
      '-map',
      '0:a:0',
      '-f',
      's16le',
      '-ac',
      '1',
      '-ar',
      String(rate),
      'pipe:1',
    ]);
    const decoded = new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length >> 1);
    const beepTimes = markerSamples.map((s0) => {
      let i = s0 - rate / 5;
      while (Math.abs(decoded[i]!) < 3000) i++;
      return i / rate;
    });
    const offsets = flashTimes.map((t, i) => t - beepTimes[i]!);
    // Within one frame is the contract; measured it is well under a millisecond.
    for (const o of offsets) expect(Math.abs(o)).toBeLessThan(Math.min(frameDur, 0.005));
    // No drift: the offset at 59.5 s is the offset at 1 s, within a few samples.
    expect(Math.abs(offsets[2]! - offsets[0]!)).toBeLessThan(0.002);
  }, 120_000);

  it('never stalls, whichever track the caller feeds first, and bounds what it buffers', async () => {
    // 1 MB frames: a few exceed the pipe high-water mark, so writes really wait for ffmpeg. ffmpeg
    // reads the input that is behind and reads nothing from the second input until the first has
    // data: a writer that waited on the wrong pipe would hang here.
    const [w, h, fps, rate] = [512, 512, 25, 16000];
    const frame = grey(w, h, 77);
    const patterns: Record<string, (m: Mp4Writer) => Promise<void>> = {
      interleaved: async (m) => {
        for (let i = 0; i < 75; i++) {
          await m.writeAudio(new Int16Array(320));
          await m.writeAudio(new Int16Array(320));
          await m.writeVideoFrame(frame);
        }
      },
      videoFirstBlocks: async (m) => {
        for (let b = 0; b < 6; b++) {
          for (let i = 0; i < 12; i++) await m.writeVideoFrame(frame);
          await m.writeAudio(new Int16Array(7680));
        }
      },
      audioFirstBlocks: async (m) => {
        for (let b = 0; b < 3; b++) {
          await m.writeAudio(new Int16Array(rate));
          for (let i = 0; i < fps; i++) await m.writeVideoFrame(frame);
        }
      },
    };
    for (const [name, feed] of Object.entries(patterns)) {
      const m = new Mp4Writer({
        path: path.join(dir, `${name}.mp4`),
        width: w,
        height: h,
        fps,
        sampleRate: rate,
        preset: 'ultrafast',
      });
      let maxBuffered = 0;
      const poll = setInterval(() => (maxBuffered = Math.max(maxBuffered, m.bufferedBytes.video)), 2);
      await feed(m);
      const res = await m.finish();
      clearInterval(poll);
      expect(Math.abs(res.videoDuration - res.audioDuration), name).toBeLessThan(1 / fps);
      // Bounded: the high-water mark plus at most about a second of frames written ahead of the audio.
      expect(maxBuffered, name).toBeLessThan(MP4_PIPE_HIGH_WATER + (fps + 2) * frame.length);
    }
  }, 60_000);

  it("writes video-only renders with a silent AAC track ('silent') or none ('none'), streaming either way", async () => {
    const [w, h, fps] = [512, 512, 30];
    const frame = grey(w, h, 120);
    for (const audioTrack of ['silent', 'none'] as const) {
      const file = path.join(dir, `video-only-${audioTrack}.mp4`);
      const m = new Mp4Writer({ path: file, width: w, height: h, fps, audioTrack, preset: 'ultrafast' });
      await expect(m.writeAudio(new Int16Array(2))).rejects.toThrow(/writeAudio on a writer with audioTrack/);
      let maxBuffered = 0;
      for (let i = 0; i < 45; i++) {
        await m.writeVideoFrame(frame);
        maxBuffered = Math.max(maxBuffered, m.bufferedBytes.video);
      }
      const res = await m.finish();
      expect(maxBuffered).toBeLessThanOrEqual(MP4_PIPE_HIGH_WATER + frame.length);
      const p = await probe(file);
      if (audioTrack === 'none') {
        expect(p.streams.map((s) => s.codec_name)).toEqual(['h264']);
        expect(res.audioSamples).toBe(0);
      } else {
        const v = p.streams.find((s) => s.codec_type === 'video')!;
        const a = p.streams.find((s) => s.codec_type === 'audio')!;
        expect([v.codec_name, a.codec_name, a.sample_rate]).toEqual(['h264', 'aac', '48000']);
        expect(res.audioSamples).toBe(72000);
        expect(Math.abs(Number(v.duration) - Number(a.duration))).toBeLessThanOrEqual(1 / fps);
      }
    }
  });

  it('fails clearly when ffmpeg fails, with the tail of its stderr', async () => {
    const file = path.join(dir, 'bad.mp4');
    const mp4 = new Mp4Writer({
      path: file,
      width: 32,
      height: 32,
      fps: 25,
      sampleRate: 16000,
      preset: 'no-such-preset',
    });
    const err = await (async () => {
      try {
        for (let i = 0; i < 50; i++) {
          await mp4.writeAudio(new Int16Array(640));
          await mp4.writeVideoFrame(grey(32, 32, 9));
        }
        await mp4.finish();
      } catch (e) {
        return e;
      }
      return null;
    })();
    expect(err).toBeInstanceOf(FfmpegError);
    expect((err as FfmpegError).exitCode).not.toBe(0);
    expect((err as FfmpegError).message).toMatch(/ffmpeg stderr[\s\S]*preset/i);
  });

  it('reports a missing binary, bad sizes and odd dimensions', async () => {
    const missing = new Mp4Writer({
      path: path.join(dir, 'x.mp4'),
      width: 32,
      height: 32,
      fps: 25,
      sampleRate: 16000,
      ffmpegPath: '/nonexistent/ffmpeg',
    });
    await missing.writeVideoFrame(grey(32, 32, 0)).catch(() => {});
    await expect(missing.finish()).rejects.toThrow(/cannot run ffmpeg \(\/nonexistent\/ffmpeg\)/);

    expect(
      () => new Mp4Writer({ path: path.join(dir, 'z.mp4'), width: 33, height: 32, fps: 25, sampleRate: 16000 }),
    ).toThrow(/even dimensions/);
    const ok = new Mp4Writer({ path: path.join(dir, 'w.mp4'), width: 32, height: 32, fps: 25, sampleRate: 16000 });
    await expect(ok.writeVideoFrame(new Uint8Array(10))).rejects.toThrow(/expected 4096/);
    await ok.abort();
    expect(existsSync(path.join(dir, 'w.mp4'))).toBe(false);
  });
});
