import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { RenderRequest, RenderResult } from '../../render/generate/index.ts';

/** The render job's program (render/generate/job.ts in a process of its own). */
const CHILD = fileURLToPath(new URL('../../render/cli/render-job.ts', import.meta.url));
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

/**
 * Runs one render in a child process (render/cli/render-job.ts under tsx), tracked in `children` while it
 * runs (so a stopping worker can kill it). Rejects when the child crashes or exits non-zero.
 */
export function spawnRender(req: RenderRequest, children: Set<ChildProcess>): Promise<RenderResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', TSX_LOADER, CHILD, JSON.stringify(req)], {
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    children.add(child);
    let out = '';
    let errText = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (errText = (errText + b.toString()).slice(-4000)));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      children.delete(child);
      const line = out.trim().split('\n').pop();
      if (code === 0 && line) {
        try {
          return resolve(JSON.parse(line) as RenderResult);
        } catch {
          /* fall through */
        }
      }
      reject(new Error(`${req.clip ? 'clip' : 'loop'} render exited with ${signal ?? code}: ${errText.trim().slice(-1000)}`));
    });
  });
}
