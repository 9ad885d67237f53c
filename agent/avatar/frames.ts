/**
 * A call's frame pipeline: which frame to draw next (up to DRAW_AHEAD ahead of playout, each in a
 * buffer of its own), the drawn frames kept until their time, and the one due now. Playout's clock
 * decides every frame's time; audio it dropped (speech started, an interruption) makes the frames
 * drawn for it stale, and they are drawn again.
 */
import { i420Planes, i420Size } from '../../render/encode/index.ts';
import { frameAudioSpan } from '../../render/lipsync/index.ts';
import { isNeutral } from '../../render/synth/index.ts';
import { mouthShape } from '../../render/talking-head/index.ts';
import type { Body } from './body.ts';
import type { SpeechPlayout } from './playout.ts';
import type { FrameJob } from './renderer.ts';

/** A frame the host should render now for this call. */
export interface DueFrame extends FrameJob {
  frame: number;
  /** The playout's epoch it was drawn for (SpeechPlayout.epoch): drawn before audio was dropped, it may show what no longer plays. */
  epoch: number;
}

/** The frame due now, drawn: what the call publishes. */
export interface ShownFrame {
  frame: number;
  i420: Uint8Array;
  /** A mouth was drawn on it. */
  mouth: boolean;
  /** Frames that fell due since the last one shown but were not drawn in time: skipped (late). */
  skipped: number;
}

/**
 * Frames drawn ahead of playout, at most: 80 ms of slack for a batch on a busy machine. A frame is
 * drawn ahead only once its audio is queued and its mouth known (SpeechPlayout.frameKnown).
 */
const DRAW_AHEAD = 2;
const MARKER = 32;

/** What the pipeline reads of the call's playout: its clock, and what plays at each frame. */
type PlayoutClock = Pick<
  SpeechPlayout,
  'epoch' | 'frameAt' | 'frameKnown' | 'msUntilFrame' | 'frameContent' | 'frameCurrent' | 'frameAudio'
>;

export interface FramePipelineOptions {
  playout: PlayoutClock;
  body: Body;
  width: number;
  height: number;
  fps: number;
  sampleRate: number;
  /** A neural model draws from each frame's audio (no mouth shape). */
  neural: boolean;
  /** The A/V sync marker (HostContext.syncMarker). */
  syncMarker: boolean;
}

export class FramePipeline {
  /** Frame buffers (I420): the one shown and those drawn ahead. */
  private readonly buffers: Uint8Array[];
  /** The audio of each frame buffer's frame, for a neural model (its mel window is computed from it in the lip-sync thread). */
  private readonly audioBuffers: Int16Array[] = [];
  private lastShownFrame = -1;
  private lastQueued = -1;
  private epoch = 0;
  private readonly ready = new Map<number, { job: DueFrame; i420: Uint8Array }>();

  constructor(private readonly o: FramePipelineOptions) {
    // Shared with the lip-sync thread, which draws the mouth into them in place.
    this.buffers = Array.from(
      { length: DRAW_AHEAD + 1 },
      () => new Uint8Array(new SharedArrayBuffer(i420Size(o.width, o.height))),
    );
    if (o.neural) {
      const samples = frameAudioSpan(0, o.fps, o.sampleRate).length;
      this.audioBuffers = this.buffers.map(
        () => new Int16Array(new SharedArrayBuffer(samples * Int16Array.BYTES_PER_ELEMENT)),
      );
    }
  }

  /** The last frame published; -1 before the first. */
  get lastShown(): number {
    return this.lastShownFrame;
  }

  /**
   * The next frame to draw, up to DRAW_AHEAD frames ahead of playout: the host renders it (with
   * every call's) while the current frame shows, so a slow batch never delays a capture.
   */
  next(now: number): DueFrame | null {
    const { playout } = this.o;
    this.forgetStaleFrames();
    const due = playout.frameAt(now, this.lastShownFrame).frame;
    const k = Math.max(due, this.lastQueued + 1);
    if (k > due + DRAW_AHEAD) return null;
    // Drawn once what plays then is settled (its audio in the sink, its mouth analysed), unless it
    // falls due too soon to wait: late audio must not leave a closed mouth where speech plays.
    if (k > due && !playout.frameKnown(k) && playout.msUntilFrame(k, now) > 1000 / this.o.fps) return null;
    this.lastQueued = k;
    const body = this.o.body.frameAt(k);
    // The clip's next frame decodes (its own thread) while this one draws (the lip-sync's).
    if (body.index + 1 < body.media.frameCount) body.media.i420(body.index + 1).catch(() => {});
    const slot = k % this.buffers.length;
    const target = this.buffers[slot]!;
    if (this.o.neural)
      return {
        frame: k,
        body,
        shape: null,
        audio: playout.frameAudio(k, this.audioBuffers[slot]!),
        target,
        epoch: this.epoch,
      };
    const content = playout.frameContent(k);
    const shape = content.mouth ? mouthShape(content.mouth) : null;
    return { frame: k, body, shape: shape && !isNeutral(shape) ? shape : null, audio: null, target, epoch: this.epoch };
  }

  /** A drawn frame, kept until its time comes. */
  rendered(job: DueFrame, i420: Uint8Array): void {
    if (job.frame > this.lastShownFrame && this.o.playout.frameCurrent(job.frame, job.epoch))
      this.ready.set(job.frame, { job, i420 });
  }

  /** About how long until the next frame is due, in ms; Infinity when it is due already. */
  msUntilNext(now: number): number {
    const ms = this.o.playout.msUntilFrame(this.lastShownFrame + 1, now);
    return ms > 0 ? ms : Infinity;
  }

  /**
   * The frame due now, if it is drawn; it counts as shown. When it is not, the latest frame drawn
   * since the last one shown is shown, late: on a machine so busy that every frame is drawn after
   * its time (a call's first seconds on a loaded worker), a picture a frame or two behind its voice
   * beats a frozen one. The frames passed over are skipped.
   */
  takeDue(now: number): ShownFrame | null {
    const { playout } = this.o;
    this.forgetStaleFrames();
    const due = playout.frameAt(now, this.lastShownFrame).frame;
    if (due <= this.lastShownFrame) return null;
    let shown = -1;
    for (const k of this.ready.keys()) if (k <= due && k > shown) shown = k;
    const drawn = this.ready.get(shown);
    if (!drawn) return null;
    for (const k of this.ready.keys()) if (k <= shown) this.ready.delete(k);
    const skipped = this.lastShownFrame >= 0 ? shown - this.lastShownFrame - 1 : 0;
    this.lastShownFrame = shown;
    let out = drawn.i420;
    if (this.o.syncMarker) {
      const own = this.buffers[shown % this.buffers.length]!;
      if (out !== own) own.set(out);
      out = own;
      // The loudness as the sink has it (known once its audio is handed over, which it is once due).
      paintMarker(out, this.o.width, this.o.height, playout.frameContent(shown).level > 1000);
    }
    return { frame: shown, i420: out, mouth: drawn.job.shape !== null || drawn.job.audio !== null, skipped };
  }

  /** Audio was dropped since frames were drawn ahead (speech started, or an interruption): those it covered are drawn again. */
  private forgetStaleFrames(): void {
    const { playout } = this.o;
    if (playout.epoch === this.epoch) return;
    const drawnAt = this.epoch;
    this.epoch = playout.epoch;
    for (const k of [...this.ready.keys()]) if (!playout.frameCurrent(k, drawnAt)) this.ready.delete(k);
    let kept = this.lastShownFrame;
    while (kept < this.lastQueued && playout.frameCurrent(kept + 1, drawnAt)) kept++;
    this.lastQueued = kept;
  }
}

/** The sync marker on an I420 frame: white or black (limited-range luma, neutral chroma). */
function paintMarker(i420: Uint8Array, width: number, height: number, on: boolean): void {
  const { y, u, v, strideUV } = i420Planes(i420, width, height);
  for (let row = 0; row < MARKER; row++) y.fill(on ? 235 : 16, row * width, row * width + MARKER);
  for (let row = 0; row < MARKER / 2; row++) {
    u.fill(128, row * strideUV, row * strideUV + MARKER / 2);
    v.fill(128, row * strideUV, row * strideUV + MARKER / 2);
  }
}
