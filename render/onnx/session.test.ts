import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadedOnce } from './session.ts';

describe('ONNX Runtime in our processes', () => {
  it('phones no one: a model session leaves no telemetry behind (device id, session file, debug log)', () => {
    const home = mkdtempSync(path.join(os.tmpdir(), 'ort-home-'));
    try {
      const root = fileURLToPath(new URL('../..', import.meta.url));
      const env: Record<string, string | undefined> = { ...process.env, HOME: home, NODE_OPTIONS: '' };
      delete env.ORT_DISABLE_TELEMETRY;
      // Started in the repository (for tsx), working in the empty home.
      const script = `process.chdir(${JSON.stringify(home)}); const { audioVisemeSession } = await import('./render/visemes/audio.ts'); const s = await audioVisemeSession(); console.log('ran', s.inputNames.length);`;
      const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: root,
        env,
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(run.stdout, run.stderr).toContain('ran');
      // ONNX Runtime's uploader writes these before it sends anything.
      expect(existsSync(path.join(home, '.cache', 'Microsoft')), 'a telemetry device id under ~/.cache/Microsoft').toBe(
        false,
      );
      expect(readdirSync(home), 'files the session left in its working directory').toEqual([]);
      expect(existsSync(path.join(os.tmpdir(), `mat-debug-${run.pid}.log`)), 'a telemetry debug log').toBe(false);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe('loadedOnce', () => {
  it('shares one load between concurrent first callers, and keeps it', async () => {
    let loads = 0;
    const once = loadedOnce(
      async () => ++loads,
      async () => {},
    );
    expect(await Promise.all([once.get(), once.get()])).toEqual([1, 1]);
    expect(await once.get()).toBe(1);
    expect(loads).toBe(1);
  });

  it('does not keep a failed load: the next call loads again', async () => {
    let loads = 0;
    const once = loadedOnce(
      async () => {
        if (++loads === 1) throw new Error('model file missing');
        return loads;
      },
      async () => {},
    );
    await expect(once.get()).rejects.toThrow('model file missing');
    expect(await once.get()).toBe(2);
  });

  it('release disposes of the loaded value; the next call loads it again', async () => {
    let loads = 0;
    const disposed: number[] = [];
    const once = loadedOnce(
      async () => ++loads,
      async (v) => void disposed.push(v),
    );
    await once.release();
    expect(disposed).toEqual([]);
    expect(await once.get()).toBe(1);
    await once.release();
    expect(disposed).toEqual([1]);
    expect(await once.get()).toBe(2);
  });
});
