import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** test/fixtures/rtc-engine-log.ts in a fresh process: what reached Node, and the engine's stderr. */
function run(mode: 'quiet' | 'capture', rustLog?: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '', NODE_ENV: 'production' };
  delete env.RUST_LOG;
  if (rustLog) env.RUST_LOG = rustLog;
  const out = spawnSync(process.execPath, ['--import', 'tsx', 'test/fixtures/rtc-engine-log.ts', mode], {
    cwd: ROOT,
    env,
    encoding: 'utf8',
    timeout: 30_000,
  });
  const last = out.stdout.trim().split('\n').at(-1) ?? '';
  return { ...(JSON.parse(last) as { refused: boolean; records: number }), stderr: out.stderr };
}

describe("the WebRTC engine's log", () => {
  it(
    'stays in the engine once quieted (rtc-node would send Node every record, traces included), whose warnings go to stderr',
    { timeout: 60_000 },
    () => {
      const captured = run('capture');
      expect(captured.refused).toBe(true);
      expect(captured.records).toBeGreaterThan(5);

      const quiet = run('quiet');
      expect(quiet.refused).toBe(true);
      expect(quiet.records).toBe(0);
      // RUST_LOG's default, warn: the refused connection, as the engine tells it.
      expect(quiet.stderr).toMatch(/WARN\s+livekit\S*\].*refused/i);
    },
  );

  it("leaves an operator's RUST_LOG as it is", { timeout: 60_000 }, () => {
    const quiet = run('quiet', 'error');
    expect(quiet.records).toBe(0);
    expect(quiet.stderr).not.toMatch(/WARN\s+livekit/);
  });
});
