import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { synthesize } from '../../render/tts/index.ts';
import { startAgentHarness, type AgentHarness } from '../../test/agent-harness.ts';
import { launchChromium } from '../../test/browser.ts';
import { freePort } from '../../test/deps.ts';
import { waitFor } from '../../test/helpers.ts';
import type { GrantBody } from '../routes/realtime/test-support.ts';

/**
 * The playground in Chromium, a real call end to end: the page mints a session as the signed-in
 * dashboard session, joins the real LiveKit server with livekit-client, and talks to the real agent
 * worker with Chromium's fake microphone playing a speech recording (the local OpenAI-compatible
 * fake serves the STT and the LLM). Realtime project: it measures nothing, but a call competes for
 * the cores like the worker tests do.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const QUESTION = 'Hello, what is a compiler?';
const ANSWER = 'A compiler translates programs.';

/** A 16-bit mono WAV: silence, the question, silence (Chromium loops the file as the microphone). */
async function speechWav(): Promise<string> {
  const s = await synthesize({ text: QUESTION, voice: 'rms' });
  const pad = new Int16Array(s.sampleRate * 3);
  const pcm = new Int16Array(pad.length * 2 + s.samples.length);
  pcm.set(s.samples, pad.length);
  const data = Buffer.from(pcm.buffer);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(s.sampleRate, 24);
  header.writeUInt32LE(s.sampleRate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(data.length, 40);
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'playground-')), 'question.wav');
  writeFileSync(file, Buffer.concat([header, data]));
  return file;
}

let h: AgentHarness;
let browser: Awaited<ReturnType<typeof launchChromium>>;

beforeAll(async () => {
  h = await startAgentHarness({ avatar: { displayName: 'Grace', loop: { seconds: 4, size: 512 } } });
  h.fake.script = { transcribe: () => ({ text: QUESTION }), chat: () => ({ text: ANSWER }) };
  await h.startWorker();
  browser = await launchChromium([
    '--use-fake-ui-for-media-stream',
    '--use-fake-device-for-media-stream',
    `--use-file-for-fake-audio-capture=${await speechWav()}`,
    '--autoplay-policy=no-user-gesture-required',
  ]);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await h?.endOpenCalls();
  await h?.close();
});

/**
 * Two looks at the avatar's video a second apart: the mean absolute difference of their pixels
 * (`host`: the element whose shadow root holds the video).
 */
function frameChange(page: Page, host?: string): Promise<number> {
  const video = host
    ? `document.querySelector('${host}').shadowRoot.querySelector('video')`
    : `document.querySelector('video.avatar-video')`;
  return page.evaluate(`(async () => {
    const v = ${video};
    const c = document.createElement('canvas');
    c.width = 64; c.height = 64;
    const g = c.getContext('2d', { willReadFrequently: true });
    const look = () => { g.drawImage(v, 0, 0, 64, 64); return g.getImageData(0, 0, 64, 64).data; };
    const a = look();
    await new Promise((r) => setTimeout(r, 1000));
    const b = look();
    let sum = 0;
    for (let i = 0; i < a.length; i++) sum += Math.abs(a[i] - b[i]);
    return sum / a.length;
  })()`) as Promise<number>;
}

/** A plain page of another origin than the API's, with the embed snippet: its origin and how to stop it. */
async function tenantSite(): Promise<{ origin: string; close(): void }> {
  const port = await freePort();
  const site = createServer((_req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end(`<!doctype html><title>A tenant's page</title><h1>Talk to us</h1>
<script src="${h.apiUrl}/platform/embed.js"></script>
<avatar-call id="avatar"></avatar-call>`);
  });
  await new Promise<void>((resolve) => site.listen(port, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${port}`, close: () => site.close() };
}

/**
 * A grant of a workspace with allowed origins: its join URL names this API where it listens (a
 * deployment's PUBLIC_BASE_URL; the harness picks its port after the API's config is made).
 */
function servedHere(grant: GrantBody): GrantBody {
  expect(grant.participant_token).toBeNull();
  expect(grant.join_url).toMatch(/\/api\/v1\/realtime\/livekit\/join$/);
  return { ...grant, join_url: `${h.apiUrl}${new URL(grant.join_url!).pathname}` };
}

describe('the playground in Chromium', () => {
  it(
    'happy: a call from the page: the avatar moves, hears the fake microphone, answers aloud with captions; hanging up releases and bills it',
    { timeout: 180_000 },
    async () => {
      const context = await browser.newContext({ baseURL: h.apiUrl, viewport: { width: 1000, height: 900 } });
      const page = await context.newPage();
      const { token } = await h.t.services.dashboard.createLink({
        tenantId: h.tenantId,
        email: 'owner@example.com',
        role: 'owner',
      });
      await page.goto(`/platform/signin#token=${token}`);
      await page.waitForURL('**/platform/dashboard');
      await page.goto(`/platform/dashboard/avatars/${h.avatarId}/playground`);
      const chatBefore = h.fake.chatRequests.length;
      await page.getByRole('button', { name: 'Start a call' }).click();

      const playground = page.locator('.playground');
      await expect.poll(() => playground.getAttribute('data-phase'), { timeout: 60_000 }).toBe('live');
      const sessionId = (await playground.getAttribute('data-session'))!;
      expect(sessionId).toMatch(/^ses_/);
      // The picture is alive: frames that change.
      await expect.poll(() => frameChange(page), { timeout: 30_000 }).toBeGreaterThan(0.5);

      // The fake microphone's question is heard (STT, then the LLM), and the answer is said: heard
      // in the page's audio, and shown as the avatar's caption.
      await waitFor('the LLM asked', () => (h.fake.chatRequests.length > chatBefore ? true : undefined), {
        timeoutMs: 60_000,
      });
      await expect
        .poll(() => page.locator('.caption.avatar').allTextContents(), { timeout: 60_000 })
        .toContainEqual(expect.stringContaining(ANSWER));
      await expect
        .poll(async () => Number(await page.getByTestId('avatar-level').getAttribute('data-level')), {
          timeout: 30_000,
          interval: 50,
        })
        .toBeGreaterThan(0.02);
      // The screenshot of docs/dashboard.md (UPDATE_DOCS_SCREENSHOTS=1), else a temporary one.
      const shots = process.env.UPDATE_DOCS_SCREENSHOTS ? path.join(ROOT, 'docs/img') : os.tmpdir();
      await page.screenshot({
        path: path.join(
          shots,
          process.env.UPDATE_DOCS_SCREENSHOTS ? 'dashboard-playground.png' : `playground-${process.pid}.png`,
        ),
      });

      expect(await page.getByTestId('embed-snippet').textContent()).toContain(`${h.apiUrl}/platform/embed.js`);
      await page.getByRole('button', { name: 'Hang up' }).click();
      await expect.poll(() => playground.getAttribute('data-phase')).toBe('ended');
      const { usage } = await h.settledOnce(sessionId);
      expect(usage.status).toBe('released');
      expect(usage.billableSeconds).toBeGreaterThan(0);

      // The call is in the workspace's usage.
      await page.goto('/platform/billing');
      await expect.poll(() => page.locator('table.sessions').textContent()).toContain(sessionId);
      await context.close();
    },
  );

  it(
    "happy: the embed snippet on a plain page of another origin: the grant the tenant's backend minted joins the call, the avatar answers with captions; leaving the page ends and bills it",
    { timeout: 180_000 },
    async () => {
      const site = await tenantSite();
      try {
        // The tenant's backend mints with its API key; the page gets only the grant.
        const grant = await h.mintCall();
        const chatBefore = h.fake.chatRequests.length;
        const page = await browser.newPage();
        await page.goto(`${site.origin}/`);
        await page.evaluate(`document.getElementById('avatar').grant = ${JSON.stringify(grant)}`);
        await expect.poll(() => page.locator('avatar-call').getAttribute('state'), { timeout: 60_000 }).toBe('live');
        await expect.poll(() => frameChange(page, 'avatar-call'), { timeout: 30_000 }).toBeGreaterThan(0.5);
        await waitFor('the LLM asked', () => (h.fake.chatRequests.length > chatBefore ? true : undefined), {
          timeoutMs: 60_000,
        });
        // Playwright's locators pierce the element's shadow root.
        await expect
          .poll(() => page.locator('avatar-call li.avatar').allTextContents(), { timeout: 60_000 })
          .toContainEqual(expect.stringContaining(ANSWER));
        await page.close({ runBeforeUnload: true });
        const { usage } = await h.settledOnce(grant.session_id);
        expect(usage.status).toBe('released');
        expect(usage.billableSeconds).toBeGreaterThan(0);
      } finally {
        site.close();
      }
    },
  );

  it(
    "happy: a workspace that allows the page's origin: the grant carries a join token, not the LiveKit token; the element redeems it from the page (CORS) and the call joins and ends as before",
    { timeout: 180_000 },
    async () => {
      const site = await tenantSite();
      await h.t.services.tenants.setAllowedOrigins(h.tenantId, ['https://app.example.com', site.origin]);
      try {
        const grant = servedHere((await h.mintCall()) as GrantBody);
        const page = await browser.newPage();
        await page.goto(`${site.origin}/`);
        await page.evaluate(`document.getElementById('avatar').grant = ${JSON.stringify(grant)}`);
        await expect.poll(() => page.locator('avatar-call').getAttribute('state'), { timeout: 60_000 }).toBe('live');
        await expect.poll(() => frameChange(page, 'avatar-call'), { timeout: 30_000 }).toBeGreaterThan(0.5);
        const [token] = await h.t.services.sql<{ used_at: Date | null }[]>`
          select used_at from live_join_tokens where session_id = ${grant.session_id}`;
        expect(token?.used_at).toBeInstanceOf(Date);
        await page.close({ runBeforeUnload: true });
        const { usage } = await h.settledOnce(grant.session_id);
        expect(usage.status).toBe('released');
      } finally {
        await h.t.services.tenants.setAllowedOrigins(h.tenantId, []);
        site.close();
      }
    },
  );

  it(
    'security: a page whose origin the workspace does not allow: the element shows the refusal and never joins; the join token stays unused',
    { timeout: 120_000 },
    async () => {
      const site = await tenantSite();
      await h.t.services.tenants.setAllowedOrigins(h.tenantId, ['https://app.example.com']);
      try {
        const grant = servedHere((await h.mintCall()) as GrantBody);
        const page = await browser.newPage();
        await page.goto(`${site.origin}/`);
        await page.evaluate(`document.getElementById('avatar').grant = ${JSON.stringify(grant)}`);
        const call = page.locator('avatar-call');
        await expect.poll(() => call.getAttribute('state'), { timeout: 30_000 }).toBe('ended');
        expect(await call.getByRole('status').textContent()).toBe(
          "This page's origin is not allowed to join this call.",
        );
        // Nothing to hang up.
        expect(await call.getByRole('button', { name: 'Hang up' }).isVisible()).toBe(false);
        const [token] = await h.t.services.sql<{ used_at: Date | null }[]>`
          select used_at from live_join_tokens where session_id = ${grant.session_id}`;
        expect(token).toEqual({ used_at: null });
        // No user joined: the call never started (the avatar may have joined its room by now).
        expect((await h.t.services.liveSessions.get(grant.session_id))?.startedAt ?? null).toBeNull();
        await page.close();
      } finally {
        await h.t.services.tenants.setAllowedOrigins(h.tenantId, []);
        await h.endOpenCalls();
        site.close();
      }
    },
  );
});
