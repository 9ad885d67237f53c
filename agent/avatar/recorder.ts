/**
 * A call's recording: what the avatar publishes (its video and audio) with the user's audio mixed
 * in, written to an H.264 + AAC MP4 while the call runs. Everything sits on the call's playout
 * clock: the avatar's audio at the position it plays, the user's audio at the position playing when
 * it arrived (so the file sounds as the call did), frame n at n / fps. Only a few seconds of audio
 * are held before they are written, so memory stays flat over a long call.
 */
import { stat } from 'node:fs/promises';
import { Mp4Writer } from '../../render/encode/index.ts';

export interface RecorderOptions {
  path: string;
  width: number;
  height: number;
  fps: number;
  sampleRate: number;
  /** The call's frame number and playout sample where the recording starts. */
  startFrame: number;
  startSample: number;
}

/** The MP4 writer of a recording (an ffmpeg process, started now). */
export function recordingWriter(
  o: Pick<RecorderOptions, 'path' | 'width' | 'height' | 'fps' | 'sampleRate'>,
): Mp4Writer {
  return new Mp4Writer({
    path: o.path,
    width: o.width,
    height: o.height,
    fps: o.fps,
    sampleRate: o.sampleRate,
    pixelFormat: 'i420',
    crf: 23,
    preset: 'veryfast',
  });
}

export interface RecordingResult {
  path: string;
  durationSeconds: number;
  sizeBytes: number;
}

/**
 * Frames more than this behind the writer are written as the last frame again rather than queued as
 * copies (the encoder is running late): memory stays bounded and the file keeps its clock.
 */
const MAX_QUEUED_FRAMES = 50;

export class CallRecorder {
  private readonly writer: Mp4Writer;
  private readonly spf: number;
  private nextFrame: number;
  private hasFrame = false;
  /** Copies of frames waiting in the video chain, reused once written (no allocation per frame). */
  private readonly spareFrames: Uint8Array[] = [];
  /**
   * Audio not yet written, from sample `mixBase` (absolute playout index): the avatar's and the
   * user's apart, mixed as they are written, so that avatar audio dropped unplayed can be taken out.
   */
  private readonly pending = { avatar: new Int32Array(0), user: new Int32Array(0) };
  private mixBase: number;
  private written: number;
  // One chain per track: the MP4 writer makes a write wait while its track is ahead of the other,
  // so a single chain would deadlock (a video write waiting for audio queued behind it).
  private readonly chains = { video: Promise.resolve(), audio: Promise.resolve() };
  private queued = 0;
  private failed: unknown = null;
  /** Frames recorded as the frame before them because the encoder was behind. */
  dropped = 0;
  /** Frames from the start that passed before the first frame came (each recorded as that first frame). */
  leadInFrames = 0;

  constructor(
    private readonly o: RecorderOptions,
    /** Its MP4 writer, when started ahead (recordingWriter): starting one forks ffmpeg, which blocks the event loop. */
    writer?: Mp4Writer,
  ) {
    this.writer = writer ?? recordingWriter(o);
    this.spf = o.sampleRate / o.fps;
    this.nextFrame = o.startFrame;
    this.mixBase = o.startSample;
    this.written = o.startSample;
  }

  /** The avatar's audio pushed at playout sample `at`. */
  avatarAudio(at: number, pcm: Int16Array): void {
    this.add('avatar', at, pcm);
  }

  /** The avatar's audio pushed from playout sample `from` on was dropped unplayed (an interruption): it is not heard. */
  avatarAudioDropped(from: number): void {
    const buf = this.pending.avatar;
    buf.fill(0, Math.max(0, Math.min(buf.length, Math.round(from) - this.mixBase)));
  }

  /** Audio samples held, not yet written (what the recorder's memory grows with). */
  get heldSamples(): number {
    return Math.max(this.pending.avatar.length, this.pending.user.length);
  }

  /** The user's audio, heard at playout sample `at`. */
  userAudio(at: number, pcm: Int16Array): void {
    this.add('user', at, pcm);
  }

  /**
   * Frame `n` of the call as published, I420 (copied: the caller may reuse its buffer). Every frame
   * number from the recording's start gets a frame in the file, so the picture keeps the audio's
   * clock: one the call skipped (a late tick) is the one before it again, those before the first
   * frame that came (the recording started while frames were skipped) are that first frame, and
   * one the encoder is too far behind to take a copy of is the last one it has again.
   */
  video(n: number, i420: Uint8Array): void {
    if (n < this.nextFrame || this.failed) return;
    if (!this.hasFrame) {
      // The file's first picture stands for every frame before it since the start.
      this.hasFrame = true;
      this.leadInFrames = n - this.nextFrame;
      this.writeCopy(i420);
      for (this.nextFrame++; this.nextFrame <= n; this.nextFrame++)
        this.enqueue('video', () => this.writer.repeatVideoFrame());
      return;
    }
    for (; this.nextFrame < n; this.nextFrame++) this.enqueue('video', () => this.writer.repeatVideoFrame());
    this.nextFrame = n + 1;
    if (this.queued >= MAX_QUEUED_FRAMES) {
      this.dropped++;
      this.enqueue('video', () => this.writer.repeatVideoFrame());
      return;
    }
    this.writeCopy(i420);
  }

  private writeCopy(i420: Uint8Array): void {
    const copy = this.spareFrames.pop() ?? new Uint8Array(i420.length);
    copy.set(i420);
    this.enqueue('video', () => {
      // The writer has its own copy once the call returns.
      const written = this.writer.writeVideoFrame(copy);
      this.spareFrames.push(copy);
      return written;
    });
  }

  /** Writes the mixed audio up to playout sample `upTo` (call it a little behind the playout position). */
  flushAudio(upTo: number): void {
    const end = Math.floor(upTo);
    if (end <= this.written || this.failed) return;
    const n = end - this.written;
    const out = new Int16Array(n);
    const from = this.written - this.mixBase;
    const { avatar, user } = this.pending;
    for (let i = 0; i < n; i++) {
      const v = (avatar[from + i] ?? 0) + (user[from + i] ?? 0);
      out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
    }
    this.written = end;
    // Drop what is written from the buffers.
    for (const track of ['avatar', 'user'] as const) {
      const buf = this.pending[track];
      this.pending[track] = buf.slice(Math.min(buf.length, end - this.mixBase));
    }
    this.mixBase = end;
    this.enqueue('audio', () => this.writer.writeAudio(out));
  }

  /** Flushes everything up to `endSample` and closes the file. */
  async finish(endSample: number): Promise<RecordingResult> {
    this.flushAudio(endSample);
    await Promise.all([this.chains.video, this.chains.audio]);
    if (this.failed) {
      await this.writer.abort();
      throw this.failed;
    }
    const result = await this.writer.finish();
    const { size } = await stat(this.o.path);
    return {
      path: this.o.path,
      durationSeconds: Math.max(result.videoDuration, result.audioDuration),
      sizeBytes: size,
    };
  }

  async abort(): Promise<void> {
    this.failed ??= new Error('aborted');
    await this.writer.abort();
  }

  private add(track: 'avatar' | 'user', at: number, pcm: Int16Array): void {
    const from = Math.round(at) - this.mixBase;
    if (from + pcm.length <= 0) return; // already written (late audio is dropped)
    const need = from + pcm.length;
    let buf = this.pending[track];
    if (need > buf.length) {
      const grown = new Int32Array(Math.max(need, buf.length * 2));
      grown.set(buf);
      buf = this.pending[track] = grown;
    }
    for (let i = Math.max(0, -from); i < pcm.length; i++) buf[from + i]! += pcm[i]!;
  }

  private enqueue(track: 'video' | 'audio', write: () => Promise<void>): void {
    if (track === 'video') this.queued++;
    this.chains[track] = this.chains[track]
      .then(() => (this.failed ? undefined : write()))
      .catch((err: unknown) => {
        this.failed ??= err;
      })
      .finally(() => {
        if (track === 'video') this.queued--;
      });
  }
}
