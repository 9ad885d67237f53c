/** What every benchmark module exports, so bench/run.ts can run all of them or the ones named. */
export interface BenchOptions {
  /** `--name=value` flags of the command line (for example --rounds=3 --seconds=3). */
  flags: Record<string, string>;
}

export interface BenchReport {
  /** Machine-readable figures, written under the module's name in bench/results/latest.json. */
  results: Record<string, unknown>;
  /** A human-readable table. */
  table: string;
  /** Broken runs (not missed targets): a non-empty list makes `npm run bench` exit non-zero. */
  failures: string[];
}

export interface BenchModule {
  name: string;
  description: string;
  run(opts: BenchOptions): Promise<BenchReport>;
}
