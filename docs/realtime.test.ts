import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../api/server.ts';
import { startFakeOpenAI } from '../test/fakes/openai.ts';
import { testApi } from '../test/helpers.ts';
import { readyAvatar } from '../test/realtime.ts';
import { markdownBlock, readmeBlock, ROOT } from './readme-support.ts';

/**
 * docs/realtime.md's "Example" block runs as written: under bash with `set -euo pipefail`,
 * against a real HTTP server (the LLM is the local fake), after the README's own helpers (`call`,
 * `json`) with the variables its "First calls" leave (`API`, `KEY`, `AVATAR_ID`).
 */
const llm = await startFakeOpenAI({ chat: () => ({ text: 'I can talk with you. And I can nod.' }) });
const t = await testApi({ env: { OPENAI_BASE_URL: llm.baseUrl, LLM_MODEL: 'fake-llm' } });
let server: ApiServer;
const tmp = mkdtempSync(path.join(os.tmpdir(), 'realtime-readme-'));
beforeAll(async () => {
  server = await startApiServer(t.app.fetch, { port: 0, hostname: '127.0.0.1' });
});
afterAll(async () => {
  await server.close({ timeoutMs: 1000 });
  await t.close();
  await llm.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('docs/realtime.md, "Example"', () => {
  it('runs as written: prepare, a repeat turn saved and decoded, a talk turn, their usage', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    // The README's helpers, as its "First calls" define them.
    const helpers = readmeBlock('## First calls')
      .split('\n')
      .filter((l) => /^(json|call)\(\) \{/.test(l));
    expect(helpers).toHaveLength(2);
    const script = ['set -euo pipefail', ...helpers, markdownBlock('docs/realtime.md', '## Example')].join('\n');
    const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = spawn('bash', ['-c', script], {
        cwd: ROOT,
        env: { ...process.env, API: `http://127.0.0.1:${server.port}`, KEY: apiKey, AVATAR_ID: avatarId, TMPDIR: tmp },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('"registered":true');
    expect(run.stdout).toMatch(/\d+\.\d\d s of speech, \d+ frames 256x256 at 25 fps/);
    const turns = run.stdout.split('\n').filter((l) => /^ses_\w+ released [\d.]+ s$/.test(l));
    expect(turns).toHaveLength(2);
    expect(llm.chatRequests.at(-1)!.messages.at(-1)).toEqual({ role: 'user', content: 'What can you do?' });
  }, 120_000);
});
