import { defineConfig } from 'vitest/config';

/**
 * Two projects. `suite`: every test file, two at a time (two cores), each in its own process with
 * its own database. `realtime`: the tests that measure live media against wall-clock rates (frames
 * per second, A/V sync, barge-in over LiveKit: `*.realtime.test.ts`), run after the suite, one file
 * at a time, so that no other test file competes with them for the cores.
 */
export default defineConfig({
  test: {
    exclude: ['node_modules/**', 'data/**'],
    globalSetup: ['test/global-setup.ts'],
    reporters: ['default', './test/summary-reporter.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    // Test files start API and worker processes side by side: no fixed ports of their own (metrics
    // off, the worker's health endpoint on a free port). The tests of those listeners set their own.
    env: { METRICS_PORT: '0', AGENT_METRICS_PORT: '0', AGENT_HEALTH_PORT: '0' },
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['**/*.test.ts'],
          exclude: ['node_modules/**', 'data/**', '**/*.realtime.test.ts'],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'realtime',
          include: ['**/*.realtime.test.ts'],
          setupFiles: ['test/quiet-rtc-logs.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
