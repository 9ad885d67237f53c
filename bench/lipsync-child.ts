/**
 * One drawing process of `npm run bench -- lipsync`: its own engine and session, batches of live
 * frames from the parent's frame, for BENCH_SECONDS; prints its row as JSON on stdout.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { benchLipSyncByDevice } from '../render/lipsync/device-bench.ts';
import type { ExecutionProvider } from '../render/onnx/session.ts';

const env = process.env as Record<string, string>;
const dir = env.BENCH_INPUT!;
const figures = await benchLipSyncByDevice(
  {
    i420: new Uint8Array(readFileSync(path.join(dir, 'frame.i420'))),
    width: 512,
    height: 512,
    rig: JSON.parse(readFileSync(path.join(dir, 'rig.json'), 'utf8')),
  },
  {
    engines: { engine: env.BENCH_ENGINE! },
    devices: [env.BENCH_DEVICE as ExecutionProvider],
    batches: [Number(env.BENCH_BATCH)],
    seconds: Number(env.BENCH_SECONDS),
    threads: 1,
  },
);
process.stdout.write(`${JSON.stringify(figures.rows[0])}\n`);
