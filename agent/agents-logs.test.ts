import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { agentsLogLevel } from './agents-logs.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** agents-js's logger set up as the worker does, in a fresh process: what it writes of a line carrying a transcript. */
function logged(transcripts: boolean): string {
  const script = `
    import { log } from '@livekit/agents';
    import { initAgentsLogger } from './agent/agents-logs.ts';
    initAgentsLogger({ level: 'info', transcripts: ${transcripts} });
    const job = log().child({ jobID: 'AJ_1' });
    log().info({ 'lk.pii.user_input': 'my card number is 4242' }, 'an internal line');
    job.warn({ 'lk.pii.user_input': 'my card number is 4242', delay: 3 }, 'skipping user input');`;
  const out = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: ROOT,
    env: { ...process.env, NODE_OPTIONS: '' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(out.status, out.stderr).toBe(0);
  return out.stdout;
}

describe("agents-js's log in the worker", () => {
  it("leaves the user's words out of its lines (those of loggers made before included), and its info lines out at info", () => {
    const out = logged(false);
    expect(out).toContain('"msg":"skipping user input"');
    expect(out).toContain('"delay":3');
    expect(out).not.toContain('4242');
    expect(out).not.toContain('an internal line');
  });

  it('keeps them with LOG_TRANSCRIPTS on', () => {
    expect(logged(true)).toContain('"lk.pii.user_input":"my card number is 4242"');
  });

  it('follows LOG_LEVEL past info, and is off when it is silent', () => {
    expect(agentsLogLevel('info')).toBe('warn');
    expect(agentsLogLevel('debug')).toBe('debug');
    expect(agentsLogLevel('error')).toBe('error');
    expect(agentsLogLevel('silent')).toBe('fatal');
  });
});
