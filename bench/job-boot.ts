import { execFile } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { bundleForProcesses } from '../agent/voice/job-bundle.ts';
import { median } from './lib/load.ts';
import type { BenchModule, BenchReport } from './types.ts';

const run = promisify(execFile);
const JOB = fileURLToPath(new URL('../agent/voice/job.ts', import.meta.url));

/**
 * What a spare job process of the agent worker spends to load the voice job (agent/voice/job-bundle.ts):
 * the TypeScript under tsx (as the job processes did) against the bundle in plain Node (as they do
 * now), alternating in fresh processes, CPU of the whole process (startup and the import: every
 * thread) until the module is loaded. The job's prewarm (database pool, VAD model) comes on top, the
 * same either way.
 */
export const jobBoot: BenchModule = {
  name: 'job-boot',
  description: "CPU of a job process loading the voice job: TypeScript under tsx vs the worker's bundle",
  async run({ flags }): Promise<BenchReport> {
    const rounds = Number(flags.rounds ?? 5);
    const bundle = await bundleForProcesses(JOB);
    const load = async (url: string, execArgv: string[]) => {
      const code = `const m = await import(${JSON.stringify(url)}); if (typeof m.default?.entry !== 'function') process.exit(3); const c = process.cpuUsage(); console.log((c.user + c.system) / 1000); process.exit(0);`;
      const { stdout } = await run(process.execPath, [...execArgv, '--input-type=module', '-e', code], {
        env: { ...process.env, NODE_OPTIONS: '' },
      });
      return Number(stdout.trim());
    };
    const tsx: number[] = [];
    const bundled: number[] = [];
    for (let i = 0; i < rounds; i++) {
      tsx.push(await load(pathToFileURL(JOB).href, ['--import', 'tsx']));
      bundled.push(await load(pathToFileURL(bundle).href, []));
    }
    const results = {
      rounds,
      tsxCpuMs: median(tsx),
      bundleCpuMs: median(bundled),
      ratio: median(bundled) / median(tsx),
      tsxRuns: tsx.map(Math.round),
      bundleRuns: bundled.map(Math.round),
    };
    const failures = [...tsx, ...bundled].some((v) => !(v > 0)) ? ['a load reported no CPU time'] : [];
    const table = [
      '| job process loads | CPU, median (runs) |',
      '|---|---|',
      `| agent/voice/job.ts under tsx | ${Math.round(results.tsxCpuMs)} ms (${results.tsxRuns.join(', ')}) |`,
      `| the bundle, plain Node | ${Math.round(results.bundleCpuMs)} ms (${results.bundleRuns.join(', ')}) |`,
      `| ratio | ${results.ratio.toFixed(2)} |`,
    ].join('\n');
    return { results, table, failures };
  },
};
