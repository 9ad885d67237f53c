/**
 * One render job of the platform's job workers: the idle loop of a portrait, or a motion clip
 * (`clip` set). Rig, generation and writing, from a portrait file to an MP4 and a frame cache.
 * The workers run it in a child process (render/cli/render-job.ts); a rig refusal is a result,
 * not an error.
 */
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import { detectFaceRig, isRigError, type RigLimits } from '../rig/index.ts';
import { generateClip, generateIdleLoop, preparePortrait } from './generate.ts';
import { writeMotion } from './write.ts';

export interface RenderRequest {
  portraitPath: string;
  outDir: string;
  seed: string;
  motionPrompt: string | null;
  seconds: number;
  /**
   * Render a motion clip instead of the idle loop: `generateClip(prepared, { motionPrompt,
   * durationSeconds, seed })`, written as `clip.mp4` and `cache/` in outDir (`motionPrompt` and
   * `seconds` above are then unused).
   */
  clip?: { motionPrompt: string; durationSeconds: number; fps?: number };
  /** A person reviewed the source portrait: the rig's pose and size limits are relaxed. */
  reviewed: boolean;
}

export type RenderResult =
  | { ok: true; mp4: string; cacheDir: string; frames: number; renderMs: number; totalMs: number }
  | { ok: false; refused: { code: string; message: string } };

/** Limits for a reviewed source: what the rig can still animate, however odd the pose. */
export const REVIEWED_LIMITS: Partial<RigLimits> = {
  minFaceSizePx: 40,
  maxYawDeg: 60,
  maxPitchDeg: 60,
  maxRollDeg: 90,
};

/** Runs one render job; any error other than a rig refusal is thrown. */
export async function runRenderJob(req: RenderRequest): Promise<RenderResult> {
  const bytes = await readFile(req.portraitPath);
  try {
    const rig = await detectFaceRig(bytes, req.reviewed ? { limits: REVIEWED_LIMITS } : {});
    const prepared = await preparePortrait(bytes, { rig });
    const gen = req.clip
      ? await generateClip(prepared, {
          seed: req.seed,
          motionPrompt: req.clip.motionPrompt,
          durationSeconds: req.clip.durationSeconds,
          ...(req.clip.fps ? { fps: req.clip.fps } : {}),
        })
      : await generateIdleLoop(prepared, {
          seed: req.seed,
          seconds: req.seconds,
          ...(req.motionPrompt ? { motionPrompt: req.motionPrompt } : {}),
        });
    const mp4 = path.join(req.outDir, req.clip ? 'clip.mp4' : 'idle.mp4');
    const cacheDir = path.join(req.outDir, 'cache');
    const out = await writeMotion(gen, { mp4Path: mp4, cacheDir });
    return {
      ok: true,
      mp4,
      cacheDir,
      frames: out.frames,
      renderMs: Math.round(out.renderMs),
      totalMs: Math.round(out.totalMs),
    };
  } catch (err) {
    if (!isRigError(err)) throw err;
    return { ok: false, refused: { code: err.code, message: err.message } };
  }
}
