/**
 * MP4 (H.264 + AAC, +faststart) from raw frames and PCM, through an ffmpeg subprocess.
 *
 * Video frames stream into ffmpeg's stdin as rawvideo at a constant frame rate, audio into a
 * second pipe (fd 3) as s16le: nothing is buffered whole. Both inputs start at 0 and are timed by
 * their own counts (frame n at n/fps, sample k at k/sampleRate), so the file is on the audio sample
 * clock; `finish()` pads the shorter track so both end within one frame of each other. Video-only
 * renders use `audioTrack: 'silent'` (a silent AAC track fed by the writer) or `'none'`.
 *
 * Backpressure: a write waits for ffmpeg (pipe over MP4_PIPE_HIGH_WATER) only while its track is
 * at most a little ahead of the other in time (video: 1 s or 32 frames; audio: 2 s; nothing
 * before both tracks have 0.25 s of data), an amount ffmpeg's per-input queues absorb. ffmpeg
 * reads whichever input is behind (and, starting, nothing from the second input until the first
 * has data), so waiting on a track far ahead could stall both; the writer instead lets the caller
 * go on and feed the other track. Feed the two tracks roughly in time order, or all the audio
 * first (it is small); video written far ahead of the audio is held in memory until the audio
 * catches up. A writer must end with finish() or abort(), or the ffmpeg process stays.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { Writable } from 'node:stream';
import { i420Size } from '../../client/format.ts';

export interface Mp4WriterOptions {
  /** Output file (MP4 needs a seekable file for +faststart). */
  path: string;
  width: number;
  height: number;
  /** Frames per second: a number or an exact ratio ({ num: 30000, den: 1001 }). */
  fps: number | { num: number; den: number };
  /** Layout of each frame: tightly packed RGBA (default) or I420 (Y, U, V planes). */
  pixelFormat?: 'rgba' | 'i420';
  /**
   * 'pcm' (default): the caller writes s16 PCM with writeAudio. 'silent': a silent AAC track that
   * the writer feeds itself in step with the frames (for video-only renders that players expect
   * to carry sound). 'none': no audio track.
   */
  audioTrack?: 'pcm' | 'silent' | 'none';
  /** Audio sample rate of the s16 PCM; required for 'pcm', default 48000 for 'silent'. */
  sampleRate?: number;
  /** Default 1 (mono). */
  channels?: number;
  /** x264 constant rate factor, default 23. */
  crf?: number;
  /** x264 preset, default 'veryfast'. */
  preset?: string;
  /** AAC bit rate, default '96k'. */
  audioBitrate?: string;
  /**
   * 'pad' (default): at finish, pad the audio with silence to the end of the video, or repeat the
   * last frame until the video covers the audio. 'none': write what was given.
   */
  align?: 'pad' | 'none';
  /** ffmpeg binary; default FFMPEG_PATH, else the @ffmpeg-installer/ffmpeg build. */
  ffmpegPath?: string;
}

export interface Mp4Result {
  path: string;
  videoFrames: number;
  audioSamples: number;
  /** Seconds of video (videoFrames / fps). */
  videoDuration: number;
  /** Seconds of audio (audioSamples / sampleRate). */
  audioDuration: number;
}

export class FfmpegError extends Error {
  override name = 'FfmpegError';
  constructor(
    message: string,
    readonly exitCode: number | null,
    readonly stderrTail: string,
  ) {
    super(stderrTail ? `${message}\n--- ffmpeg stderr (tail) ---\n${stderrTail}` : message);
  }
}

/** The ffmpeg binary: FFMPEG_PATH when set, else the static build of @ffmpeg-installer/ffmpeg. */
export function resolveFfmpegPath(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.FFMPEG_PATH?.trim();
  if (fromEnv) return fromEnv;
  try {
    const require = createRequire(import.meta.url);
    const mod = require('@ffmpeg-installer/ffmpeg') as { path: string };
    return mod.path;
  } catch (e) {
    throw new Error(`no ffmpeg: set FFMPEG_PATH or install @ffmpeg-installer/ffmpeg (${String(e)})`, { cause: e });
  }
}

const STDERR_TAIL = 4000;
/** High-water mark of each pipe before a write waits for ffmpeg. */
export const MP4_PIPE_HIGH_WATER = 4 * 1024 * 1024;
/** Frame buffers kept for reuse: about what the pipe holds at its high-water mark at 512 px, plus a few. */
const MAX_SPARE_FRAMES = 16;
/** Seconds audio may lead video while a write still waits for ffmpeg (its audio queue holds 4096 packets). */
const AUDIO_SLACK_S = 2;

function ratio(fps: Mp4WriterOptions['fps']): { num: number; den: number } {
  if (typeof fps === 'object') return fps;
  if (Number.isInteger(fps)) return { num: fps, den: 1 };
  for (const base of [24, 30, 60])
    if (Math.abs(fps - (base * 1000) / 1001) < 1e-3) return { num: base * 1000, den: 1001 };
  return { num: Math.round(fps * 1000), den: 1000 };
}

export class Mp4Writer {
  readonly path: string;
  private readonly proc: ChildProcess;
  private readonly video: Writable;
  /** fd 3; null without an audio track. */
  private readonly audio: Writable | null;
  private readonly audioMode: 'pcm' | 'silent' | 'none';
  private readonly frameBytes: number;
  private readonly fpsNum: number;
  private readonly fpsDen: number;
  private readonly sampleRate: number;
  private readonly channels: number;
  private readonly align: 'pad' | 'none';
  /** Seconds video may lead audio while a write still waits for ffmpeg (well inside its 64-frame queue). */
  private readonly videoSlack: number;
  private frames = 0;
  private samples = 0;
  private lastFrame: Buffer | null = null;
  /**
   * Frame buffers the pipe is done with, for the next frames: a call records 10 MB/s of frames, and
   * a new buffer for each made the garbage collector stop the process for tens of ms every second.
   */
  private readonly spareFrames: Buffer[] = [];
  /** Writes in flight per frame buffer (the last frame may be written again to align the tracks). */
  private readonly writing = new Map<Buffer, number>();
  private stderr = '';
  private failure: FfmpegError | null = null;
  private readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private state: 'open' | 'finishing' | 'done' = 'open';

  constructor(options: Mp4WriterOptions) {
    const { width, height } = options;
    if (!Number.isInteger(width) || !Number.isInteger(height) || width < 2 || height < 2 || width % 2 || height % 2) {
      throw new RangeError(`mp4: H.264 in yuv420p needs even dimensions, got ${width}x${height}`);
    }
    const { num, den } = ratio(options.fps);
    if (!(num > 0 && den > 0)) throw new RangeError(`mp4: invalid frame rate ${num}/${den}`);
    this.audioMode = options.audioTrack ?? 'pcm';
    const sampleRate = options.sampleRate ?? (this.audioMode === 'pcm' ? undefined : 48000);
    if (sampleRate === undefined || !Number.isInteger(sampleRate) || sampleRate <= 0) {
      throw new RangeError(`mp4: invalid sample rate ${sampleRate}`);
    }
    this.path = options.path;
    this.fpsNum = num;
    this.fpsDen = den;
    this.sampleRate = sampleRate;
    this.channels = options.channels ?? 1;
    this.align = options.align ?? 'pad';
    this.videoSlack = Math.min(1, (32 * den) / num);
    const pixelFormat = options.pixelFormat ?? 'rgba';
    this.frameBytes = pixelFormat === 'rgba' ? width * height * 4 : i420Size(width, height);

    const args = [
      '-hide_banner',
      '-nostats',
      '-loglevel',
      'error',
      // Input 0: raw frames on stdin at a constant rate.
      '-f',
      'rawvideo',
      '-pix_fmt',
      pixelFormat === 'rgba' ? 'rgba' : 'yuv420p',
      '-s',
      `${width}x${height}`,
      '-framerate',
      `${num}/${den}`,
      // No probing: the raw formats are fully described here, and while ffmpeg probes one input
      // (5 s of it by default) it reads nothing from the other, which could stall both pipes.
      '-probesize',
      '32',
      '-analyzeduration',
      '0',
      '-thread_queue_size',
      '64',
      '-i',
      'pipe:0',
      // Input 1: s16le PCM on fd 3. A deep queue: audio is small and may run ahead of the video.
      ...(this.audioMode === 'none'
        ? ['-map', '0:v:0']
        : [
            '-f',
            's16le',
            '-ar',
            String(this.sampleRate),
            '-ac',
            String(this.channels),
            '-probesize',
            '32',
            '-analyzeduration',
            '0',
            '-thread_queue_size',
            '4096',
            '-i',
            'pipe:3',
            '-map',
            '0:v:0',
            '-map',
            '1:a:0',
            '-c:a',
            'aac',
            '-b:a',
            options.audioBitrate ?? '96k',
          ]),
      '-c:v',
      'libx264',
      '-preset',
      options.preset ?? 'veryfast',
      '-crf',
      String(options.crf ?? 23),
      '-pix_fmt',
      'yuv420p',
      // BT.601 limited range, as converted (swscale's default for RGB input) and as frames.ts writes.
      '-colorspace',
      'smpte170m',
      '-color_primaries',
      'smpte170m',
      '-color_trc',
      'smpte170m',
      '-color_range',
      'tv',
      '-movflags',
      '+faststart',
      '-f',
      'mp4',
      '-y',
      options.path,
    ];
    const bin = options.ffmpegPath ?? resolveFfmpegPath();
    const withAudio = this.audioMode !== 'none';
    this.proc = spawn(bin, args, { stdio: ['pipe', 'ignore', 'pipe', withAudio ? 'pipe' : 'ignore'] });
    this.video = this.proc.stdin!;
    this.audio = withAudio ? (this.proc.stdio[3] as Writable) : null;
    this.proc.stderr!.setEncoding('utf8');
    this.proc.stderr!.on('data', (s: string) => {
      this.stderr = (this.stderr + s).slice(-STDERR_TAIL);
    });
    // EPIPE and friends when ffmpeg dies: the exit reports the cause.
    this.video.on('error', () => {});
    this.audio?.on('error', () => {});
    this.exited = new Promise((resolve) => {
      this.proc.on('error', (e) => {
        this.fail(new FfmpegError(`mp4: cannot run ffmpeg (${bin}): ${e.message}`, null, ''));
        resolve({ code: null, signal: null });
      });
      this.proc.on('close', (code, signal) => {
        if (code !== 0 && this.state !== 'done') {
          this.fail(
            new FfmpegError(`mp4: ffmpeg exited with ${code ?? signal} writing ${this.path}`, code, this.stderr.trim()),
          );
        }
        resolve({ code, signal });
      });
    });
  }

  /** Frames written so far. */
  get videoFrames(): number {
    return this.frames;
  }

  /** Samples (per channel) written so far. */
  get audioSamples(): number {
    return this.samples;
  }

  /** Bytes accepted but not yet taken by ffmpeg, per input (bounded unless one track runs far ahead). */
  get bufferedBytes(): { video: number; audio: number } {
    return { video: this.video.writableLength, audio: this.audio?.writableLength ?? 0 };
  }

  /** One frame (RGBA or I420 of the declared size). The bytes are copied before the first await: the caller may reuse its buffer once the call returns. */
  async writeVideoFrame(frame: Uint8Array): Promise<void> {
    this.mustBeOpen();
    if (frame.length !== this.frameBytes) {
      throw new RangeError(`mp4: frame of ${frame.length} bytes, expected ${this.frameBytes}`);
    }
    // Copied (the caller may reuse its buffer at once) into a buffer the pipe has finished with.
    const buf =
      frame === this.lastFrame ? this.lastFrame : (this.spareFrames.pop() ?? Buffer.allocUnsafe(this.frameBytes));
    if (buf !== frame) buf.set(frame);
    const previous = this.lastFrame;
    this.lastFrame = buf;
    if (previous && previous !== buf) this.recycle(previous);
    this.frames += 1;
    if (this.audioMode === 'silent')
      this.pushAudio(new Uint8Array(2 * this.channels * (this.frameEndSample() - this.samples)));
    this.writing.set(buf, (this.writing.get(buf) ?? 0) + 1);
    this.video.write(buf, () => {
      const left = this.writing.get(buf)! - 1;
      if (left > 0) this.writing.set(buf, left);
      else {
        this.writing.delete(buf);
        this.recycle(buf);
      }
    });
    const waitable =
      this.audioMode !== 'pcm' || this.videoTime() <= this.audioTime() + (this.running() ? this.videoSlack : 0);
    if (waitable) await this.drained(this.video);
  }

  /** The last frame again (a frame the source skipped: the file keeps its clock). */
  async repeatVideoFrame(): Promise<void> {
    if (!this.lastFrame) throw new Error('mp4: no frame to repeat yet');
    await this.writeVideoFrame(this.lastFrame);
  }

  /** A frame buffer back to the spares once nothing holds it: the pipe has written it, and it is not the last frame. */
  private recycle(buf: Buffer): void {
    if (buf !== this.lastFrame && !this.writing.has(buf) && this.spareFrames.length < MAX_SPARE_FRAMES)
      this.spareFrames.push(buf);
  }

  /** PCM samples (interleaved when stereo): an Int16Array, or its s16le bytes. Copied. */
  async writeAudio(pcm: Int16Array | Uint8Array): Promise<void> {
    this.mustBeOpen();
    const bytes = pcm instanceof Int16Array ? new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength) : pcm;
    if (bytes.length % (2 * this.channels) !== 0) {
      throw new RangeError(`mp4: ${bytes.length} bytes is not a whole number of ${this.channels}-channel s16 samples`);
    }
    if (this.audioMode !== 'pcm') throw new Error(`mp4: writeAudio on a writer with audioTrack '${this.audioMode}'`);
    if (bytes.length === 0) return;
    this.pushAudio(bytes);
    if (this.audioTime() <= this.videoTime() + (this.running() ? AUDIO_SLACK_S : 0)) await this.drained(this.audio!);
  }

  private pushAudio(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.samples += bytes.length / (2 * this.channels);
    this.audio!.write(Buffer.from(bytes));
  }

  /** The sample at which the last written frame ends. */
  private frameEndSample(): number {
    return Math.round((this.frames * this.sampleRate * this.fpsDen) / this.fpsNum);
  }

  /** Aligns the tracks (see `align`), closes the inputs and waits for ffmpeg to finish the file. */
  async finish(): Promise<Mp4Result> {
    this.mustBeOpen();
    if (this.frames === 0) {
      await this.abort();
      throw new Error('mp4: no video frames were written');
    }
    if (this.align === 'pad' && this.audioMode === 'pcm') await this.alignTracks();
    this.state = 'finishing';
    this.video.end();
    this.audio?.end();
    const { code } = await this.exited;
    if (this.failure) throw this.failure;
    if (code !== 0) throw new FfmpegError(`mp4: ffmpeg exited with ${code}`, code, this.stderr.trim());
    this.state = 'done';
    return {
      path: this.path,
      videoFrames: this.frames,
      audioSamples: this.samples,
      videoDuration: this.videoTime(),
      audioDuration: this.audioTime(),
    };
  }

  /** Kills ffmpeg and removes the partial file. */
  async abort(): Promise<void> {
    if (this.state === 'done') return;
    this.state = 'done';
    this.proc.kill('SIGKILL');
    await this.exited;
    await rm(this.path, { force: true });
  }

  private async alignTracks(): Promise<void> {
    const frameSamples = (this.sampleRate * this.fpsDen) / this.fpsNum;
    // Video short of the audio by half a frame or more: repeat the last frame.
    const wantFrames = Math.round(this.samples / frameSamples);
    while (this.frames < wantFrames) await this.repeatVideoFrame();
    // Audio short of the video: pad with silence to the video's end.
    const target = Math.round(this.frames * frameSamples);
    const missing = target - this.samples;
    if (missing > 0) {
      const chunk = Math.min(missing, this.sampleRate);
      for (let left = missing; left > 0; left -= chunk) {
        await this.writeAudio(new Int16Array(Math.min(chunk, left) * this.channels));
      }
    }
  }

  /**
   * Past ffmpeg's start-up: it opens its inputs one after the other and reads the second only once
   * it has a packet of the first, so until both have data neither may be waited on while ahead.
   */
  private running(): boolean {
    return this.frames > 1 && this.samples * 4 >= this.sampleRate;
  }

  private videoTime(): number {
    return (this.frames * this.fpsDen) / this.fpsNum;
  }

  private audioTime(): number {
    return this.samples / this.sampleRate;
  }

  private mustBeOpen(): void {
    if (this.failure) throw this.failure;
    if (this.state !== 'open') throw new Error('mp4: the writer is finished');
  }

  private fail(e: FfmpegError): void {
    this.failure ??= e;
  }

  /** Resolves when `stream` is under its high-water mark; rejects when ffmpeg fails. */
  private async drained(stream: Writable): Promise<void> {
    if (stream.writableLength < MP4_PIPE_HIGH_WATER) return;
    await new Promise<void>((resolve, reject) => {
      const done = () => {
        stream.off('drain', done);
        clearInterval(poll);
        if (this.failure) reject(this.failure);
        else resolve();
      };
      stream.on('drain', done);
      // The process may exit without a drain event.
      const poll = setInterval(() => {
        if (this.failure || stream.writableLength < MP4_PIPE_HIGH_WATER) done();
      }, 50);
    });
    if (this.failure) throw this.failure;
  }
}

/**
 * Writes an MP4 from an iterable of frames and the whole audio (or an iterable of audio chunks),
 * interleaving them on the sample clock: before each frame, the audio up to that frame's end.
 */
export async function writeMp4(
  options: Mp4WriterOptions & {
    sampleRate: number;
    frames: Iterable<Uint8Array> | AsyncIterable<Uint8Array>;
    audio: Int16Array;
  },
): Promise<Mp4Result> {
  const w = new Mp4Writer(options);
  const { num, den } = ratio(options.fps);
  const channels = options.channels ?? 1;
  const audio = options.audio;
  let sent = 0; // samples per channel
  try {
    let n = 0;
    for await (const frame of options.frames) {
      n += 1;
      const until = Math.min(audio.length / channels, Math.round((n * options.sampleRate * den) / num));
      if (until > sent) {
        await w.writeAudio(audio.subarray(sent * channels, until * channels));
        sent = until;
      }
      await w.writeVideoFrame(frame);
    }
    if (sent * channels < audio.length) await w.writeAudio(audio.subarray(sent * channels));
    return await w.finish();
  } catch (e) {
    await w.abort().catch(() => {});
    throw e;
  }
}
