/**
 * One render job (render/generate/job.ts) as a child process of a job worker, so the
 * ~15 ms-per-frame warp never blocks the worker's event loop and a crash of the renderer cannot
 * take the worker down.
 *
 * Input: one JSON argument, RenderRequest. Output: one JSON line on stdout, RenderResult, then exit
 * 0. A rig refusal is a result (`refused`), not a crash: the caller fails the avatar without retry.
 * Anything else exits non-zero and the job is retried.
 */
import { runRenderJob, type RenderRequest } from '../generate/job.ts';

// The parent (the job worker) holds the IPC channel: when it dies, so does this render.
process.on('disconnect', () => process.exit(1));

async function main() {
  const req = JSON.parse(process.argv[2] ?? '') as RenderRequest;
  const result = await runRenderJob(req);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);
