import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CONFIG_VARIABLES } from '../core/platform/config.ts';
import { ROOT, readmeBlock, runBlocks, startReadmeServer, type ReadmeServer } from './readme-support.ts';

/**
 * The README's "First calls" run as written (docs/readme-support.ts) against a real server.
 * The sections after it, which need LiveKit, the agent worker and an LLM: readme.realtime.test.ts.
 */
let server: ReadmeServer;
beforeAll(async () => {
  server = await startReadmeServer();
}, 90_000);
afterAll(() => server?.stop(), 30_000);

describe('README "First calls"', () => {
  it('runs as written with bash -euo pipefail: the avatar gets ready, its loop plays, the clip library PUT answers 202', async () => {
    const { code, stdout, where } = await runBlocks(readmeBlock('## First calls'), server);
    expect(code, where).toBe(0);

    const lines = stdout.trim().split('\n');
    // The balance, the new key and the usage page are JSON; the document lists the operations.
    expect(JSON.parse(lines[0]!), where).toMatchObject({ balanceCreditMicros: 3_600_000_000 });
    expect(JSON.parse(lines[1]!), where).toMatchObject({
      name: 'backend',
      spendLimitCreditMicros: 60_000_000,
      apiKey: expect.stringMatching(/^svc_/),
    });
    expect(JSON.parse(lines[2]!), where).toMatchObject({ data: [], nextCursor: null });
    expect(lines, where).toContain('/api/v1/avatars/{avatarId}/clips');
    expect(stdout, where).toMatch(/^avatar ava_\w+: ready$/m);
    const duration = /^duration=([\d.]+)$/m.exec(stdout);
    expect(Number(duration?.[1]), where).toBeCloseTo(2, 0);
    // The default clip, listed before the declaration replaces it.
    expect(
      lines.some((l) => /^smile (queued|rendering|ready)$/.test(l)),
      where,
    ).toBe(true);
    // The PUT's envelope, then its status.
    expect(lines.at(-1), where).toBe('202');
    const answer = JSON.parse(lines.at(-2)!) as {
      revision: number;
      plan: { kept: string[]; queued: string[]; retired: string[] };
      behavior: unknown;
    };
    expect(answer.revision).toBe(1);
    expect({ ...answer.plan, queued: [...answer.plan.queued].sort() }).toEqual({
      kept: [],
      queued: ['listen', 'look', 'nod'],
      retired: ['smile'],
    });
    expect(answer.behavior).toMatchObject({
      idle: { clips: ['look'], weights: { source: 3, look: 1 } },
      on: { userSpeechStarted: { clips: ['listen'] } },
    });
  }, 240_000);

  it('documents every variable the processes read in its configuration table', () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('\n## Configuration\n'), readme.indexOf('\n## Layout\n'));
    const documented = new Set(
      section
        .split('\n')
        .filter((l) => l.startsWith('| `'))
        .flatMap((l) => [...l.split('|')[1]!.matchAll(/`([A-Z0-9_]+)`/g)].map((m) => m[1]!)),
    );
    expect(CONFIG_VARIABLES.filter((v) => !documented.has(v))).toEqual([]);
  });
});
