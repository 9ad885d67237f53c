import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Runs vitest on one throwaway test file with the summary reporter; returns its closing line and exit code. */
function runFixture(source: string): { line: string; code: number | null } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'reporter-'));
  writeFileSync(path.join(dir, 'fixture.test.ts'), source);
  writeFileSync(
    path.join(dir, 'vitest.config.ts'),
    `export default { test: { include: ['fixture.test.ts'], reporters: [${JSON.stringify(path.join(ROOT, 'test/summary-reporter.ts'))}] } };\n`,
  );
  const r = spawnSync(path.join(ROOT, 'node_modules/.bin/vitest'), ['run', '--root', dir], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 60_000,
  });
  const line = r.stdout.split('\n').find((l) => l.startsWith('tests: ')) ?? '';
  return { line, code: r.status };
}

describe('the closing line CI reads', () => {
  it('counts a file whose beforeAll throws as a failure, though its tests were skipped', { timeout: 60_000 }, () => {
    const r = runFixture(
      `import { beforeAll, it } from 'vitest';\nbeforeAll(() => { throw new Error('setup failed'); });\nit('a', () => {});\n`,
    );
    expect(r.line).toBe('tests: 0 passed, 1 failed, 1 skipped');
    expect(r.code).not.toBe(0);
  });

  it('counts passes and failures', { timeout: 60_000 }, () => {
    const r = runFixture(
      `import { expect, it } from 'vitest';\nit('a', () => {});\nit('b', () => expect(1).toBe(2));\n`,
    );
    expect(r.line).toBe('tests: 1 passed, 1 failed, 0 skipped');
  });
});
