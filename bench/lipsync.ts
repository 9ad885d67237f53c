/**
 * The lip-sync engines under load: P processes at once, each drawing batches of a live call's
 * frames (512x512 I420, in place) through its own engine and session, on the CPU or on CUDA. What
 * a host's lip-sync threads ask of its cores, or of one GPU (docs/render.md, "On a GPU").
 *
 *   npm run bench -- lipsync [--device=cpu|cuda] [--processes=1,2,4,8] [--batch=16] [--seconds=6]
 *                            [--engine=builtin|/path/to/model.onnx]
 *
 * A model of Wav2Lip's size to try: render/models/build/lipsync/build_wav2lip_sized.py.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { rgbaToI420 } from '../render/encode/index.ts';
import { frame512 } from './render.ts';
import type { BenchModule, BenchReport } from './types.ts';

const CHILD = fileURLToPath(new URL('./lipsync-child.ts', import.meta.url));
const run = promisify(execFile);

export const lipsync: BenchModule = {
  name: 'lipsync',
  description:
    'lip-sync engines under load: P processes drawing batches of live frames at once, each its own session, CPU or CUDA (--device=cuda): frames a second in all',
  async run({ flags }): Promise<BenchReport> {
    const device = flags.device ?? process.env.RENDER_DEVICE ?? 'cpu';
    const engine = flags.engine ?? 'builtin';
    const batch = Number(flags.batch ?? 16);
    const seconds = Number(flags.seconds ?? 6);
    const steps = (flags.processes ?? '1,2').split(',').map(Number);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-lipsync-'));
    const failures: string[] = [];
    const rows: { processes: number; msPerFrame: number[]; framesPerSecond: number; callsAt25fps: number }[] = [];
    try {
      const { frame, rig } = await frame512();
      writeFileSync(path.join(dir, 'frame.i420'), rgbaToI420(frame.data, 512, 512));
      writeFileSync(path.join(dir, 'rig.json'), JSON.stringify(rig));
      const env = {
        ...process.env,
        BENCH_INPUT: dir,
        BENCH_ENGINE: engine,
        BENCH_DEVICE: device,
        BENCH_BATCH: String(batch),
        BENCH_SECONDS: String(seconds),
      };
      for (const p of steps) {
        const outs = await Promise.allSettled(
          Array.from({ length: p }, () =>
            run(process.execPath, ['--import', 'tsx', CHILD], { env, maxBuffer: 1 << 20 }),
          ),
        );
        const ms: number[] = [];
        for (const o of outs) {
          if (o.status === 'rejected') failures.push(`${p} processes: ${String(o.reason)}`);
          else ms.push((JSON.parse(o.value.stdout.trim().split('\n').at(-1)!) as { msPerFrame: number }).msPerFrame);
        }
        const framesPerSecond = ms.reduce((a, m) => a + 1000 / m, 0);
        rows.push({ processes: p, msPerFrame: ms, framesPerSecond, callsAt25fps: framesPerSecond / 25 });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const table = [
      `${engine} on ${device}, batches of ${batch}, each process its own session, all at once:`,
      'processes  ms a frame each       frames a second in all  calls at 25 fps',
      ...rows.map(
        (r) =>
          `${String(r.processes).padEnd(11)}${r.msPerFrame
            .map((m) => m.toFixed(2))
            .join(', ')
            .padEnd(22)}${r.framesPerSecond.toFixed(0).padEnd(24)}${r.callsAt25fps.toFixed(0)}`,
      ),
    ].join('\n');
    return { results: { device, engine, batch, seconds, rows }, table, failures };
  },
};
