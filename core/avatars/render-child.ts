/**
 * One render (the idle loop, or a motion clip with `clip` set), in a child process of the job worker (so the ~15 ms-per-frame warp never
 * blocks the API's event loop, and a crash of the renderer cannot take the worker down).
 *
 * Input: one JSON argument, RenderRequest. Output: one JSON line on stdout, RenderResult, then exit
 * 0. A rig refusal is a result (`refused`), not a crash: the caller fails the avatar without retry.
 * Anything else exits non-zero and the job is retried.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { generateClip, generateIdleLoop, preparePortrait, writeMotion } from '../../render/generate/index.ts';
import { detectFaceRig, isRigError, type RigLimits } from '../../render/rig/index.ts';

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
  /** A person reviewed the source (PATCH sourceReview): the rig's pose and size limits are relaxed. */
  reviewed: boolean;
}

export type RenderResult =
  | { ok: true; mp4: string; cacheDir: string; frames: number; renderMs: number; totalMs: number }
  | { ok: false; refused: { code: string; message: string } };

/** Limits for a reviewed source: what the rig can still animate, however odd the pose. */
const REVIEWED_LIMITS: Partial<RigLimits> = { minFaceSizePx: 40, maxYawDeg: 60, maxPitchDeg: 60, maxRollDeg: 90 };

// The parent (the job worker) holds the IPC channel: when it dies, so does this render.
process.on('disconnect', () => process.exit(1));

async function main() {
  const req = JSON.parse(process.argv[2] ?? '') as RenderRequest;
  const bytes = await readFile(req.portraitPath);
  let result: RenderResult;
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
    result = { ok: true, mp4, cacheDir, frames: out.frames, renderMs: Math.round(out.renderMs), totalMs: Math.round(out.totalMs) };
  } catch (err) {
    if (!isRigError(err)) throw err;
    result = { ok: false, refused: { code: err.code, message: err.message } };
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);
