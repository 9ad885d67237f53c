import type { Reporter, TestModule } from 'vitest/node';

/** Ends the run with the plain line CI reads: "tests: N passed, N failed, N skipped". */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const m of modules) {
      let failedHere = 0;
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failedHere++;
        else skipped++;
      }
      failed += failedHere;
      // A file that failed with no failing test (it did not load, or a beforeAll/afterAll hook threw
      // and its tests were skipped) counts as one failure: the line must never say 0 failed then.
      if (failedHere === 0 && m.state() === 'failed') failed++;
    }
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
