/**
 * One render job (render/generate/job.ts) as a child process of a job worker, so the
 * ~15 ms-per-frame warp never blocks the worker's event loop and a crash of the renderer cannot
 * take the worker down.
 *
 * Input: one JSON argument, RenderRequest. Output: one JSON line on stdout, RenderResult, then exit
 * 0. A rig refusal is a result (`refused`), not a crash: the caller fails the avatar without retry.
 * Anything else exits non-zero and the job is retried.
 */
import { runRenderJob } from '../generate/job.ts';
import { runAsChild } from './child.ts';

runAsChild(runRenderJob);
