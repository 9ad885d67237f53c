import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The docs and comments stand alone: a user of this repository has its files only, so nothing in it
 * may lean on a document it does not ship (a "spec section", a design note, a path outside the
 * clone). The contract lives in docs/*.md and /openapi.json.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const OUTSIDE =
  /spec section|spec rules? \d|\(spec: [a-z ]*(rule|section)|\bthe spec\b|spec's|\.\.\/shared\/|shared\/spec|design\.md/i;

describe('docs and comments stand alone', () => {
  it('no file cites a spec section, a design note or a path outside the repository', () => {
    const files = execFileSync(
      'git',
      ['ls-files', '-co', '--exclude-standard', '*.ts', '*.md', '*.js', '*.sh', '*.yaml'],
      { cwd: ROOT, encoding: 'utf8' },
    )
      .split('\n')
      .filter((f) => f && !f.startsWith('node_modules/') && f !== 'docs/standalone.test.ts');
    expect(files.length).toBeGreaterThan(100);
    const found: string[] = [];
    for (const f of files) {
      readFileSync(path.join(ROOT, f), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (OUTSIDE.test(line)) found.push(`${f}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(found).toEqual([]);
  });
});
