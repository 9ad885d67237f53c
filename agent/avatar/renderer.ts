/**
 * One renderer per worker process: each tick, every call's due frame goes through one lip-sync
 * engine call (one onnxruntime session; one graph run per crop size, or for a neural model one per
 * batch, or per frame where its batch is fixed at 1), so adding calls adds batch items rather than
 * sessions, and a GPU host (`RENDER_DEVICE=cuda`) gets large batches.
 *
 * Frames stay I420 from the clip's decoded frame to the encoder. A speaking frame is copied into
 * the call's own buffer and its mouth drawn there in place by the lip-sync engine, on the I420
 * planes themselves; in a lip-sync thread all of that (and a neural model's mel window, from the
 * frame's audio) happens off this event loop. A frame with the mouth at rest, or in silence for a
 * neural model, is published as the clip has it, without a copy.
 */
import type { FrameAudio, LipSyncEngine, LipSyncI420Item } from '../../render/lipsync/index.ts';
import type { MouthShape } from '../../render/synth/index.ts';
import type { BodyFrame } from './body.ts';

export interface FrameJob {
  body: BodyFrame;
  /** The mouth to draw (the built-in engine); null leaves the frame as the clip has it (mouth closed, at rest). */
  shape: MouthShape | null;
  /** What a neural model hears for this frame; null (silence all through its window) leaves the frame as the clip has it. */
  audio: FrameAudio | null;
  /** Where a drawn frame goes, I420 (the call's own buffer, reused; on a SharedArrayBuffer, a lip-sync thread draws it in place). */
  target: Uint8Array;
}

const AT_REST: MouthShape = { open: 0, wide: 0, round: 0 };

export interface RenderStats {
  ticks: number;
  frames: number;
  /** Frames that went through the lip-sync graph (a mouth was drawn). */
  drawn: number;
  /** Wall time of whole batches, ms. */
  batchMs: number;
}

export class BatchRenderer {
  readonly stats: RenderStats = { ticks: 0, frames: 0, drawn: 0, batchMs: 0 };

  constructor(readonly lipsync: LipSyncEngine) {}

  /**
   * Renders every job's frame. Returns, per job, the I420 to publish: the job's `target` when a
   * mouth was drawn, otherwise the clip's decoded frame itself (shared, read-only: publish or copy
   * it, never write to it).
   */
  async render(jobs: readonly FrameJob[]): Promise<Uint8Array[]> {
    const t0 = performance.now();
    const frames = await Promise.all(jobs.map((j) => j.body.media.i420(j.body.index)));
    const out: Uint8Array[] = frames.slice();
    const items: LipSyncI420Item[] = [];
    jobs.forEach((job, i) => {
      if (this.lipsync.needsAudio ? !job.audio : !job.shape) return;
      const { media, index } = job.body;
      job.target.set(frames[i]!);
      items.push({
        i420: job.target,
        width: media.width,
        height: media.height,
        face: media.face(index),
        shape: job.shape ?? AT_REST,
        ...(job.audio ? { audio: job.audio } : {}),
      });
      out[i] = job.target;
    });
    if (items.length > 0) await this.lipsync.renderI420(items);
    this.stats.ticks++;
    this.stats.frames += jobs.length;
    this.stats.drawn += items.length;
    this.stats.batchMs += performance.now() - t0;
    return out;
  }
}
