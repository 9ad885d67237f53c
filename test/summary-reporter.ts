import type { Reporter, TestModule } from 'vitest/node';

/** Ends the run with the plain line CI reads: "tests: N passed, N failed, N skipped". */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const m of modules) {
      let tests = 0;
      for (const t of m.children.allTests()) {
        tests++;
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      // A file that failed to load has no tests to count: count the file.
      if (tests === 0 && m.state() === 'failed') failed++;
    }
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
