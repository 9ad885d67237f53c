import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '../agent/test-support.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../test/fakes/openai.ts';
import { liveKitEnv, relayWebhooksTo } from '../test/livekit.ts';
import { readmeBlock, runBlocks, startReadmeServer, type ReadmeServer } from './readme-support.ts';

/**
 * The README past "First calls", run as written after it in the same shell: a live call (the mint,
 * `npm run call` talking to the avatar, usage and connection history), turns over HTTP, and a
 * lipsync. The processes its "Live calls" section starts are started here as it says (the API and
 * `npm run agent` with LiveKit and an OpenAI-compatible endpoint, on one DATA_DIR), on the test
 * run's LiveKit server, its webhooks relayed to the API, and a local OpenAI-compatible server
 * standing in for the paid STT and LLM.
 */
const HEARD = ['Hello, who are you?', 'What do you like?'];

let fake: FakeOpenAI;
let server: ReadmeServer;
let worker: WorkerProcess;
let webhooks: { stop(): Promise<void> };

beforeAll(async () => {
  const heard = [...HEARD];
  fake = await startFakeOpenAI({
    transcribe: () => ({ text: heard.shift() ?? '' }),
    chat: () => ({ text: 'I am Eileen, an astronaut, and I love the view.' }),
  });
  const env = { ...liveKitEnv(), OPENAI_BASE_URL: fake.baseUrl, OPENAI_API_KEY: 'sk-test' };
  server = await startReadmeServer(env);
  webhooks = await relayWebhooksTo(`${server.api}/webhooks/livekit`);
  worker = await startWorkerProcess({ ...env, DATA_DIR: server.env.DATA_DIR!, DATABASE_URL: '', LOG_LEVEL: 'info' });
}, 180_000);

afterAll(async () => {
  await worker?.stop();
  await webhooks?.stop();
  await server?.stop();
  await fake?.close();
}, 60_000);

describe('README past "First calls"', () => {
  it(
    'runs as written: a live call with the avatar over LiveKit, turns over HTTP, a lipsync',
    { timeout: 300_000 },
    async () => {
      const script = [
        readmeBlock('## First calls'),
        readmeBlock('## Live calls', 1),
        readmeBlock('## Turns over HTTP'),
        readmeBlock('## Lip-synced MP4s'),
      ].join('\n');
      const { code, stdout, where } = await runBlocks(script, server);
      // README_OUT: what the blocks printed, for the README's sample outputs.
      if (process.env.README_OUT) writeFileSync(process.env.README_OUT, stdout);
      expect(code, `${where}\nworker:\n${worker.logs().slice(-3000)}`).toBe(0);

      // The live call: the avatar's video, the user's words heard, the avatar's answers, then the bill.
      expect(stdout, where).toMatch(/avatar video 512x512/);
      // Only the CLI's own lines: no log records of the libraries under it (rtc-node's, at debug level).
      expect(
        stdout.split('\n').filter((l) => l.includes('"name":"lk-rtc"')),
        where,
      ).toEqual([]);
      // What the user said reached the avatar's LLM as the user's words.
      const said = fake.chatRequests.map((r) => JSON.stringify(r.messages.filter((m) => m.role === 'user')));
      for (const q of HEARD) expect(said.join('\n'), `${where}\nworker:\n${worker.logs().slice(-3000)}`).toContain(q);
      expect(stdout.match(/avatar: I am Eileen, an astronaut/g)?.length ?? 0, where).toBeGreaterThanOrEqual(1);
      expect(stdout, where).toMatch(/^ses_\w+ live released [\d.]+ s$/m);
      const sessionId = /^(ses_\w+) live released/m.exec(stdout)![1]!;
      expect(stdout, where).toContain(`user-${sessionId} joined`);
      expect(stdout, where).toContain(`avatar-${sessionId} joined`);
      // The persona reached the LLM.
      expect(JSON.stringify(fake.chatRequests[0]?.messages ?? []), where).toContain('A cheerful astronaut');

      // The repeat turn, decoded; the talk turn answered by the LLM.
      const turn = /^([\d.]+) s of speech, (\d+) frames$/m.exec(stdout);
      expect(Number(turn?.[1]), where).toBeGreaterThan(1);
      expect(Number(turn?.[2]), where).toBeGreaterThan(25);
      expect(
        fake.chatRequests.some((r) => JSON.stringify(r.messages).includes('What can you do?')),
        where,
      ).toBe(true);

      // The lipsync's answer.
      const lipsync = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
        url: string;
        fps: number;
        durationSeconds: number;
      };
      expect(lipsync, where).toMatchObject({ fps: 25, url: expect.stringContaining('/media/') });
      expect(lipsync.durationSeconds, where).toBeGreaterThan(1);
    },
  );
});
