import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { bundleForProcesses, withoutTsx } from './job-bundle.ts';

const run = promisify(execFile);
const dir = mkdtempSync(path.join(os.tmpdir(), 'job-bundle-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `code` in a plain Node process: no tsx, so TypeScript anywhere in what it imports fails. */
async function plainNode(code: string): Promise<string> {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code], {
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  return stdout.trim();
}

describe('the voice job bundle', () => {
  it('loads in a process without tsx and is the agent agents-js runs', async () => {
    const file = await bundleForProcesses(fileURLToPath(new URL('./job.ts', import.meta.url)));
    const out = await plainNode(
      `const m = await import(${JSON.stringify(pathToFileURL(file).href)}); console.log(typeof m.default.entry, typeof m.default.prewarm, typeof m.parseDispatchMetadata);`,
    );
    expect(out).toBe('function function function');
  }, 60_000);

  it("keeps each module's paths relative to its own source file", async () => {
    mkdirSync(path.join(dir, 'lib'), { recursive: true });
    writeFileSync(path.join(dir, 'lib', 'data.txt'), 'beside the module');
    writeFileSync(
      path.join(dir, 'lib', 'reader.ts'),
      "import { readFileSync } from 'node:fs';\nexport const read = (): string => readFileSync(new URL('./data.txt', import.meta.url), 'utf8');\n",
    );
    writeFileSync(
      path.join(dir, 'entry.ts'),
      "import { read } from './lib/reader.ts';\nexport const text: string = read();\n",
    );
    const file = await bundleForProcesses(path.join(dir, 'entry.ts'));
    expect(path.dirname(file)).not.toBe(dir);
    expect(
      await plainNode(`const m = await import(${JSON.stringify(pathToFileURL(file).href)}); console.log(m.text);`),
    ).toBe('beside the module');
  }, 30_000);

  it('refuses a module that uses import.meta beyond its url (it could not be right in the bundle)', async () => {
    writeFileSync(path.join(dir, 'dirname.ts'), 'export const here: string = import.meta.dirname;\n');
    await expect(bundleForProcesses(path.join(dir, 'dirname.ts'))).rejects.toThrow(
      /import\.meta other than import\.meta\.url/,
    );
  });

  it('gives the same file for the same code, so workers starting together share it', async () => {
    const entry = path.join(dir, 'same.ts');
    writeFileSync(entry, 'export const n: number = 1;\n');
    const files = await Promise.all(Array.from({ length: 6 }, () => bundleForProcesses(entry)));
    const a = files[0]!;
    expect(new Set(files)).toEqual(new Set([a]));
    writeFileSync(entry, 'export const n: number = 2;\n');
    expect(await bundleForProcesses(entry)).not.toBe(a);
  });
});

describe("the job processes' Node flags", () => {
  it("drop tsx's, in every form it is given, and keep the rest", () => {
    expect(
      withoutTsx([
        '--require',
        '/app/node_modules/tsx/dist/preflight.cjs',
        '--import',
        'file:///app/node_modules/tsx/dist/loader.mjs',
        '--cpu-prof',
      ]),
    ).toEqual(['--cpu-prof']);
    expect(withoutTsx(['--import', 'tsx', '--enable-source-maps'])).toEqual(['--enable-source-maps']);
    expect(withoutTsx(['--import=tsx', '--import=tsx/esm', '--max-old-space-size=4096'])).toEqual([
      '--max-old-space-size=4096',
    ]);
    expect(withoutTsx(['--import', './otel.mjs', '-r', 'dotenv/config'])).toEqual([
      '--import',
      './otel.mjs',
      '-r',
      'dotenv/config',
    ]);
  });
});
