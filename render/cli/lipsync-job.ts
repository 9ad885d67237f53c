/**
 * One lipsync render (render/talking-head/job.ts) as a child process of the API, so the per-frame
 * lip-sync synthesis never blocks the API's event loop and a crash of the renderer cannot take the
 * API down.
 *
 * Input: one JSON argument, LipsyncJobRequest. Output: one JSON line on stdout, LipsyncJobResult,
 * then exit 0. Anything else exits non-zero.
 */
import { runLipsyncJob, type LipsyncJobRequest } from '../talking-head/job.ts';

// The parent (the API process) holds the IPC channel: when it dies, so does this render.
process.on('disconnect', () => process.exit(1));

async function main() {
  const req = JSON.parse(process.argv[2] ?? '') as LipsyncJobRequest;
  const result = await runLipsyncJob(req);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);
