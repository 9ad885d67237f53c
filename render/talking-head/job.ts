/**
 * One lipsync render job of the API: given audio lip-synced over a stored idle loop. The API runs
 * it in a child process (render/cli/lipsync-job.ts); audio the renderer refuses is a result, not
 * an error.
 */
import { renderTalkingHeadOverCache, type CacheTalkingHeadOptions } from './over-cache.ts';
import { TalkingHeadError } from './errors.ts';

export type LipsyncJobRequest = CacheTalkingHeadOptions;

export type LipsyncJobResult =
  | { ok: true; frames: number; fps: number; width: number; height: number; durationSeconds: number }
  | { ok: false; refused: { code: string; message: string } };

/** Runs one lipsync render; any error other than a refusal of the audio is thrown. */
export async function runLipsyncJob(req: LipsyncJobRequest): Promise<LipsyncJobResult> {
  try {
    const r = await renderTalkingHeadOverCache(req);
    return {
      ok: true,
      frames: r.videoFrames,
      fps: r.fps,
      width: r.width,
      height: r.height,
      durationSeconds: r.videoDuration,
    };
  } catch (err) {
    if (err instanceof TalkingHeadError) return { ok: false, refused: { code: err.code, message: err.message } };
    throw err;
  }
}
