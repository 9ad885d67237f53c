import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import type { DashboardRole } from '../../core/dashboard/auth.ts';
import { startJobWorkers } from '../../core/wiring/job-workers.ts';
import { launchChromium } from '../../test/browser.ts';
import { freePort } from '../../test/deps.ts';
import { testApi } from '../../test/helpers.ts';
import { testVideo } from '../../render/framecache/test-videos.ts';
import { readyAvatar } from '../routes/realtime/test-support.ts';
import { recordingFixtures } from '../routes/recordings/test-support.ts';
import { startApiServer } from '../server.ts';

/**
 * The dashboard in a real browser: Debian's Chromium, headless, driven by playwright-core, against
 * the API on a real port with a job worker (2-second loops, no default clips: the avatar is ready
 * in seconds). Screenshots of the main pages are taken by the same steps; with
 * UPDATE_DOCS_SCREENSHOTS=1 they are written to docs/img/ (otherwise to a temporary folder, so a
 * test run leaves the clone as it was).
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SHOTS = process.env.UPDATE_DOCS_SCREENSHOTS
  ? path.join(ROOT, 'docs/img')
  : path.join(os.tmpdir(), `dashboard-shots-${process.pid}`);
mkdirSync(SHOTS, { recursive: true });
const PORTRAIT = path.join(ROOT, 'render/rig/fixtures/astronaut.jpg');

const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const t = await testApi({
  env: {
    PUBLIC_BASE_URL: base,
    AVATAR_LOOP_SECONDS: '2',
    DEFAULT_MOTION_CLIPS: '',
    JOB_POLL_SECONDS: '1',
    RATE_LIMIT_POINTS: '1000',
  },
});
const workers = await startJobWorkers(t.services);
const server = await startApiServer(t.app.fetch, { port, hostname: '127.0.0.1' });
const browser = await launchChromium();
const owner = await t.newTenant({ credits: 600 });
await t.services.tenants.setSwitch(owner.tenantId, 'clip_library', true);
let evil: Server | undefined;

afterAll(async () => {
  await browser.close();
  evil?.close();
  await server.close({ timeoutMs: 1000 });
  await workers.stop({ timeoutMs: 2000 });
  await t.close();
});

/** A browser profile signed in with a fresh one-time link (opened as a user opens it). */
async function signedIn(
  role: DashboardRole,
  tenantId = owner.tenantId,
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({
    baseURL: base,
    permissions: ['clipboard-read', 'clipboard-write'],
    viewport: { width: 1200, height: 900 },
  });
  const page = await context.newPage();
  page.on('dialog', (d) => void d.accept());
  const { token } = await t.services.dashboard.createLink({ tenantId, email: `${role}@example.com`, role });
  await page.goto(`/platform/signin#token=${token}`);
  await page.waitForURL('**/platform/dashboard');
  await page.locator('header.top').waitFor();
  return { context, page };
}

/** A screenshot of the page, after checking no full key is on it. */
async function screenshot(page: Page, name: string): Promise<void> {
  expect(await page.content()).not.toMatch(/svc_[0-9A-Za-z]{16}_[0-9A-Za-z]{43}/);
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

// Evaluated in the page (DOM names: this file is typed for Node).
const clipboard = (page: Page) => page.evaluate('navigator.clipboard.readText()') as Promise<string>;

describe('dashboard in Chromium', { timeout: 120_000 }, () => {
  let ownerPage: Page;

  it('happy: a sign-in link opens the keys page; the session cookie is HttpOnly and the link is gone from the address bar', async () => {
    const { context, page } = await signedIn('owner');
    ownerPage = page;
    await expect.poll(() => page.locator('h1').textContent()).toBe('API keys');
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: 'avatar_dashboard', httpOnly: true, sameSite: 'Strict' });
    expect(await page.evaluate('document.cookie')).toBe('');
  });

  it('happy: an owner creates a key, copies it, copies it again from the masked list; a hash-only key cannot be copied', async () => {
    const page = ownerPage;
    await page.fill('input[name=name]', 'backend');
    await page.check('input[name="scope-usage:read"]');
    await page.fill('input[name=spendLimitCreditMicros]', '60000000');
    await page.click('form[aria-label="Create a key"] button[type=submit]');
    await page.getByText('Created the key "backend"').waitFor();
    const created = await clipboard(page);
    expect(created).toMatch(/^svc_[0-9A-Za-z]{16}_[0-9A-Za-z]{43}$/);
    const principal = await t.services.keys.verify(`Bearer ${created}`);
    expect(principal.scopes.sort()).toEqual(['avatars:read', 'credits:read', 'realtime:write', 'usage:read']);

    const row = page.locator(`tr[data-key-id="${principal.apiKeyId}"]`);
    await expect.poll(() => row.locator('code').textContent()).toMatch(/^svc_\w{16}_\*{8}\w{4}$/);
    await page.evaluate("navigator.clipboard.writeText('')");
    await row.getByRole('button', { name: 'Copy' }).click();
    await page.getByText('Copied the key "backend"').waitFor();
    expect(await clipboard(page)).toBe(created);

    // The workspace's first key was made by the operator (the CLI): only its hash exists.
    const hashOnly = page.locator(`tr[data-key-id="${owner.apiKeyId}"]`);
    await expect.poll(() => hashOnly.textContent()).toMatch(/Cannot be copied: only its hash is stored/);
    expect(await page.content()).not.toContain(created);
    await screenshot(page, 'dashboard-keys');
  });

  it("error: bad input shows the API's error at its field, and nothing is created", async () => {
    const page = ownerPage;
    const before = (await t.services.keys.list(owner.tenantId)).length;
    await page.fill('input[name=name]', 'too late');
    await page.fill('input[name=expiresAt]', '2001-01-01T00:00');
    await page.click('form[aria-label="Create a key"] button[type=submit]');
    const error = page.locator('.field-error[data-field=expiresAt]');
    await expect.poll(() => error.textContent()).toMatch(/Invalid field "expiresAt" in body: must be in the future/);
    await page.fill('input[name=expiresAt]', '');
    await page.fill('input[name=name]', '   ');
    await page.click('form[aria-label="Create a key"] button[type=submit]');
    await expect.poll(() => page.locator('.field-error[data-field=name]').textContent()).toMatch(/"name"/);
    expect((await t.services.keys.list(owner.tenantId)).length).toBe(before);
  });

  it('security: a member sees no key management, and the keys calls answer it 403', async () => {
    const { context, page } = await signedIn('member');
    await expect.poll(() => page.locator('h1').textContent()).toBe('Avatars');
    expect(await page.locator('header.top nav').textContent()).not.toContain('API keys');
    const status = await page.evaluate(async () => {
      const s = (await (await fetch('/platform/api/session')).json()) as { csrfToken: string };
      const res = await fetch('/platform/api/keys', { headers: { 'x-dashboard-csrf': s.csrfToken } });
      return res.status;
    });
    expect(status).toBe(403);
    await context.close();
  });

  it("security: a page of another origin cannot act with the owner's session (its cookie goes along, same site: no anti-forgery token, Origin refused; the key stays active)", async () => {
    const evilPort = await freePort();
    evil = createServer((_req, res) => res.end('<!doctype html><title>elsewhere</title>'));
    await new Promise<void>((resolve) => evil!.listen(evilPort, '127.0.0.1', resolve));
    const page = await ownerPage.context().newPage();
    await page.goto(`http://127.0.0.1:${evilPort}/`);
    // Same site (127.0.0.1), another origin: the cookie goes along, so the Origin check is what refuses.
    const answer = await page.evaluate(
      async ({ url }) => {
        const res = await fetch(url, { method: 'POST', credentials: 'include', mode: 'no-cors' });
        return res.type;
      },
      { url: `${base}/platform/api/keys/${owner.apiKeyId}/revoke` },
    );
    expect(answer).toBe('opaque');
    expect((await t.services.keys.list(owner.tenantId)).find((k) => k.id === owner.apiKeyId)!.status).toBe('active');
    await page.close();
  });

  it('happy: an avatar made from the fixture portrait becomes ready and plays its idle loop; a bad declaration shows its field error', async () => {
    const page = ownerPage;
    await page.goto('/platform/dashboard/avatars');
    await page.setInputFiles('input[name=file]', PORTRAIT);
    // No name: the API's 422 shows at the name.
    await page.click('form[aria-label="Create an avatar"] button[type=submit]');
    await expect.poll(() => page.locator('.field-error[data-field=displayName]').textContent()).toMatch(/displayName/);
    await page.fill('input[name=displayName]', 'Eileen');
    await page.click('form[aria-label="Create an avatar"] button[type=submit]');
    await page.waitForURL('**/platform/dashboard/avatars/ava_*');
    const progress = page.locator('.progress');
    await expect.poll(() => progress.getAttribute('data-status'), { timeout: 100_000, interval: 1000 }).toBe('ready');
    await expect.poll(() => progress.getAttribute('data-idle')).toBe('ready');
    // The loop plays: its video decodes frames (readyState 2+ is a frame at the current time).
    await expect
      .poll(() => page.evaluate('document.querySelector("video.loop").readyState'), { timeout: 20_000 })
      .toBeGreaterThanOrEqual(2);

    const editor = page.locator('form[aria-label="Clip library"]');
    await editor.locator('textarea').waitFor();
    await editor.locator('textarea').fill('{"clips":{"nod":{"source":{"motionPrompt":"nod","durationSeconds":999}}}}');
    await editor.getByRole('button', { name: 'Save declaration' }).click();
    await expect.poll(() => editor.locator('.field-error').getAttribute('data-field')).toMatch(/^clips\.nod/);
    await screenshot(page, 'dashboard-avatar');

    // Re-directing the loop with a blank prompt: refused at the field, nothing queued.
    const redirect = page.locator('form[aria-label="Re-direct the loop"]');
    await redirect.locator('input[name=motionPrompt]').fill('   ');
    await redirect.getByRole('button', { name: 'Generate a new loop' }).click();
    await expect.poll(() => redirect.locator('.field-error').getAttribute('data-field')).toBe('motionPrompt');
    expect(await progress.getAttribute('data-idle')).toBe('ready');

    // The persona form: saved, then a greeting past its 500 characters shows the API's error there.
    const persona = page.locator('form[aria-label="Persona"]');
    await persona.locator('textarea[name=personality]').fill('A cheerful astronaut.');
    await persona.locator('input[name=greeting]').fill('Hello there!');
    await persona.getByRole('button', { name: 'Save' }).click();
    await persona.getByText('Saved.').waitFor();
    const id = new URL(page.url()).pathname.split('/').pop()!;
    expect(await t.services.avatars.get(owner.tenantId, id)).toMatchObject({
      personality: 'A cheerful astronaut.',
      settings: { greeting: 'Hello there!' },
    });
    await persona.locator('input[name=greeting]').fill('x'.repeat(501));
    await persona.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => persona.locator('.field-error').getAttribute('data-field')).toBe('settings.greeting');
  });

  it('happy: a repeat turn plays in the playground page (frames drawn, audio scheduled); a blank text shows its field error', async () => {
    const page = ownerPage;
    const [avatar] = await t.services.sql<{ id: string }[]>`
      select id from avatars where tenant_id = ${owner.tenantId} and status = 'ready'`;
    await page.goto(`/platform/dashboard/avatars/${avatar!.id}/playground`);
    const turn = page.locator('form[aria-label="Turn"]');
    await turn.getByRole('button', { name: 'Play' }).click();
    await expect.poll(() => turn.locator('.field-error').getAttribute('data-field')).toBe('text');
    await turn.locator('input[name=text]').fill('Hello there, nice to meet you.');
    await turn.getByRole('button', { name: 'Play' }).click();
    const canvas = turn.locator('canvas.turn');
    await expect.poll(() => canvas.getAttribute('data-done'), { timeout: 60_000 }).toBe('true');
    expect(Number(await canvas.getAttribute('data-frames'))).toBeGreaterThan(25);
    expect(Number(await canvas.getAttribute('data-audio-seconds'))).toBeGreaterThan(1);
  });

  it("happy: next to the embed snippet an owner sets the workspace's allowed origins (a bad one shows its field error, nothing saved); a member reads them only", async () => {
    const w = await t.newTenant({ credits: 10 });
    const avatarId = await readyAvatar(t, w.tenantId);
    const { context, page } = await signedIn('owner', w.tenantId);
    await page.goto(`/platform/dashboard/avatars/${avatarId}/playground`);
    const form = page.locator('form[aria-label="Allowed origins"]');
    const origins = form.getByTestId('allowed-origins');
    await origins.fill('https://app.example.com\nhttps://app.example.com/page');
    await form.getByRole('button', { name: 'Save origins' }).click();
    await expect.poll(() => form.locator('.field-error').getAttribute('data-field')).toBe('allowedOrigins');
    expect((await t.services.tenants.get(w.tenantId))!.allowedOrigins).toEqual([]);
    await origins.fill('https://app.example.com\n\nhttp://localhost:5173\n');
    await form.getByRole('button', { name: 'Save origins' }).click();
    await expect.poll(() => form.getByRole('status').textContent()).toContain('Saved');
    expect((await t.services.tenants.get(w.tenantId))!.allowedOrigins).toEqual([
      'https://app.example.com',
      'http://localhost:5173',
    ]);
    await context.close();

    const member = await signedIn('member', w.tenantId);
    await member.page.goto(`/platform/dashboard/avatars/${avatarId}/playground`);
    const read = member.page.locator('form[aria-label="Allowed origins"]');
    await expect
      .poll(() => read.getByTestId('allowed-origins').inputValue())
      .toBe('https://app.example.com\nhttp://localhost:5173');
    expect(await read.getByTestId('allowed-origins').getAttribute('readonly')).not.toBeNull();
    expect(await read.getByRole('button', { name: 'Save origins' }).count()).toBe(0);
    await member.context.close();
  });

  it('happy: the billing page shows the balance, the chart and the sessions, filtered by end user', async () => {
    // Two billed sessions of two end users, through the usage store as calls leave them.
    for (const [endUserId, seconds] of [
      ['user-42', 12],
      ['user-7', 30],
    ] as const) {
      const { sessionId } = await t.services.usage.open({
        tenantId: owner.tenantId,
        apiKeyId: owner.apiKeyId,
        kind: 'turn',
        endUserId,
        reserveCreditMicros: 60_000_000,
        ttlSeconds: 600,
      });
      await t.services.usage.start(sessionId);
      await t.services.usage.finish(sessionId, { status: 'released', billableMs: seconds * 1000 });
    }
    // A recorded call, as the agent worker leaves it: its MP4 in storage, the row ready.
    const f = recordingFixtures(t);
    await f.readyRecording(await f.liveSession(owner.tenantId, owner.apiKeyId), testVideo({ seconds: 1 }), 1);
    const page = ownerPage;
    await page.goto('/platform/billing');
    await expect.poll(() => page.getByTestId('available').textContent()).toMatch(/s$/);
    await page.locator('svg.chart rect').first().waitFor();
    expect(await page.locator('svg.chart rect').count()).toBe(30);
    const rows = page.locator('table.sessions tbody tr');
    await expect.poll(() => rows.count()).toBeGreaterThanOrEqual(2);
    await screenshot(page, 'dashboard-billing');
    await page.fill('input[name=endUserId]', 'user-42');
    await page.click('form.inline button');
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().textContent()).toMatch(/user-42.*12 s/);
    await page.fill('input[name=endUserId]', 'nobody-here');
    await page.click('form.inline button');
    await page.getByText('No sessions in this window.').waitFor();

    // The recording plays in the page, from its private signed URL.
    await page.getByRole('button', { name: 'Play' }).click();
    await expect
      .poll(() => page.evaluate('document.querySelector("video.player")?.readyState ?? 0'), { timeout: 20_000 })
      .toBeGreaterThanOrEqual(2);
  });
});
