/**
 * One renderer per worker process: each tick, every call's due frame goes through one lip-sync
 * engine call (one onnxruntime session, one graph run per crop size), so adding calls adds batch
 * items rather than sessions, and a GPU host (`RENDER_DEVICE=cuda`) gets large batches.
 */
import type { LipSyncEngine, LipSyncItem } from '../../render/lipsync/index.ts';
import type { MouthShape } from '../../render/synth/index.ts';
import type { BodyFrame } from './body.ts';

export interface FrameJob {
  body: BodyFrame;
  /** The mouth to draw; null leaves the frame as the clip has it (mouth closed, at rest). */
  shape: MouthShape | null;
  /** Where the drawn frame goes (the call's own buffer, reused every frame). */
  target: Uint8Array;
}

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
   * Renders every job's frame (in parallel: clip frames decode on libuv's pool). Returns, per job,
   * the RGBA to publish: the job's `target` when a mouth was drawn, otherwise the clip's decoded
   * frame itself (shared, read-only: publish or copy it, never write to it).
   */
  async render(jobs: readonly FrameJob[]): Promise<Uint8Array[]> {
    const t0 = performance.now();
    const frames = await Promise.all(jobs.map((j) => j.body.media.cache.frame(j.body.index)));
    const out: Uint8Array[] = frames.slice();
    const items: LipSyncItem[] = [];
    const at: number[] = [];
    jobs.forEach((job, i) => {
      if (!job.shape || this.lipsync.needsAudio) return;
      const media = job.body.media;
      items.push({ frame: { data: frames[i]!, width: media.width, height: media.height }, face: media.face(job.body.index), shape: job.shape, target: job.target });
      at.push(i);
    });
    if (items.length > 0) {
      const drawn = await this.lipsync.renderFrames(items);
      drawn.forEach((rgba, k) => (out[at[k]!] = rgba as Uint8Array));
    }
    this.stats.ticks++;
    this.stats.frames += jobs.length;
    this.stats.drawn += items.length;
    this.stats.batchMs += performance.now() - t0;
    return out;
  }
}
