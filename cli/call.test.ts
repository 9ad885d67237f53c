import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** `npm run call -- --grant FILE` with FILE holding `text`: its exit code and what it printed. */
function callWith(text: string) {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'call-grant-')), 'grant.json');
  writeFileSync(file, text);
  const out = spawnSync(process.execPath, ['--import', 'tsx', 'cli/call.ts', '--grant', file], {
    cwd: ROOT,
    env: { ...process.env, NODE_OPTIONS: '' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { code: out.status, stderr: out.stderr.replace(file, 'FILE') };
}

describe('npm run call with a grant file that holds no grant', () => {
  it("says the mint was refused, with the API's error, and what to do when LiveKit is not configured", () => {
    const { code, stderr } = callWith(
      '{"error":"Live calls are not available: this server has no LiveKit configured (LIVEKIT_URL)","status":503,"retryable":true,"code":"capacity_unavailable","requestId":"req_1"}',
    );
    expect(code).toBe(2);
    expect(stderr).toContain(
      "FILE is not a grant but the API's refusal of the mint: 503 capacity_unavailable: Live calls are not available",
    );
    expect(stderr).toContain('Start the API with LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET set');
    expect(stderr).not.toContain('Give --grant FILE');
  });

  it('says what an empty file, or one that is not JSON, holds', () => {
    expect(callWith('').stderr).toContain("FILE is not a grant (the mint's JSON answer): it holds nothing");
    expect(callWith('curl: (7) Failed to connect').stderr).toContain('it holds "curl: (7) Failed to connect"');
  });
});
