import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { apiAuth } from './api-auth.ts';
import { conversation } from './conversation.ts';
import { jobBoot } from './job-boot.ts';
import { lipsync } from './lipsync.ts';
import { mint } from './mint.ts';
import { render } from './render.ts';
import { sessions } from './sessions.ts';
import { videoCache } from './video-cache.ts';
import { turn } from './turn.ts';
import type { BenchModule } from './types.ts';

/**
 * `npm run bench` runs every benchmark; `npm run bench -- api` only the ones named;
 * `npm run bench -- --list` lists them. Flags `--name=value` go to the modules (for example
 * `npm run bench -- api --rounds=5 --seconds=5 --rate=5000 --pin=0`).
 * Prints a table per benchmark and writes bench/results/latest.json (entries of benchmarks not run
 * this time are kept). Exits 1 when a benchmark run is broken (errors, unexpected statuses), not when
 * a target is missed: targets are reported, not enforced.
 *
 * A new benchmark is a module exporting a BenchModule, added to BENCHMARKS.
 */
const BENCHMARKS: BenchModule[] = [apiAuth, render, lipsync, mint, turn, sessions, conversation, videoCache, jobBoot];

const RESULTS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'results', 'latest.json');

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const flags = Object.fromEntries(
    args
      .filter((a) => a.startsWith('--'))
      .map((a) => {
        const [k, ...v] = a.slice(2).split('=');
        return [k!, v.length ? v.join('=') : 'true'];
      }),
  );
  const names = args.filter((a) => !a.startsWith('--'));
  if (flags.list) {
    for (const b of BENCHMARKS) console.log(`${b.name.padEnd(10)} ${b.description}`);
    return 0;
  }
  const unknown = names.filter((n) => !BENCHMARKS.some((b) => b.name === n));
  if (unknown.length) {
    console.error(`Unknown benchmark ${unknown.join(', ')}; known: ${BENCHMARKS.map((b) => b.name).join(', ')}`);
    return 2;
  }
  const selected = names.length ? BENCHMARKS.filter((b) => names.includes(b.name)) : BENCHMARKS;

  let previous: { benchmarks?: Record<string, unknown> } = {};
  if (existsSync(RESULTS)) {
    try {
      previous = JSON.parse(readFileSync(RESULTS, 'utf8')) as typeof previous;
    } catch {
      previous = {};
    }
  }
  const benchmarks: Record<string, unknown> = { ...previous.benchmarks };
  let broken = false;
  for (const b of selected) {
    console.log(`\n== ${b.name}: ${b.description}`);
    const startedAt = new Date().toISOString();
    const t0 = Date.now();
    try {
      const report = await b.run({ flags });
      console.log(`\n${report.table}`);
      if (report.failures.length) {
        broken = true;
        console.error(`\n${b.name}: the run is broken:\n  ${report.failures.join('\n  ')}`);
      }
      benchmarks[b.name] = {
        startedAt,
        seconds: Math.round((Date.now() - t0) / 1000),
        ok: report.failures.length === 0,
        failures: report.failures,
        ...report.results,
      };
    } catch (err) {
      broken = true;
      console.error(`\n${b.name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      benchmarks[b.name] = { startedAt, ok: false, error: String(err) };
    }
  }
  mkdirSync(path.dirname(RESULTS), { recursive: true });
  writeFileSync(RESULTS, `${JSON.stringify({ updatedAt: new Date().toISOString(), benchmarks }, null, 2)}\n`);
  console.log(`\nresults: ${path.relative(process.cwd(), RESULTS)}`);
  return broken ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
