/**
 * One lipsync render (render/talking-head/job.ts) as a child process of the API, so the per-frame
 * lip-sync synthesis never blocks the API's event loop and a crash of the renderer cannot take the
 * API down.
 *
 * Input: one JSON argument, LipsyncJobRequest. Output: one JSON line on stdout, LipsyncJobResult,
 * then exit 0. Anything else exits non-zero.
 */
import { runLipsyncJob } from '../talking-head/job.ts';
import { runAsChild } from './child.ts';

runAsChild(runLipsyncJob);
