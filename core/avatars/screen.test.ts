import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../platform/log.ts';
import { testApi, type TestApi } from '../../test/helpers.ts';
import { MOTION_PROMPT_MAX as DECLARED_MOTION_PROMPT_MAX } from '../../clips/declaration/limits.ts';
import { MOTION_PROMPT_MAX } from '../../render/generate/prompt.ts';
import { localVerdict, ModerationPromptScreen } from './screen.ts';
import { ApiError } from '../platform/errors.ts';

const log = createLogger('silent');
let server: Server;
let base = '';
let calls: unknown[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const input = (JSON.parse(body) as { input: string }).input;
      calls.push({ input, auth: req.headers.authorization });
      if (req.url === '/broken') return res.writeHead(500).end('{}');
      if (req.url === '/garbage') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"nope":1}');
      const flagged = /punch/.test(input);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ results: [{ flagged, categories: { violence: flagged, sexual: false } }] }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('local prompt rules', () => {
  it("limits a prompt as render's generator does, and as a clip declaration does", () => {
    expect(MOTION_PROMPT_MAX).toBe(1200);
    expect(DECLARED_MOTION_PROMPT_MAX).toBe(MOTION_PROMPT_MAX);
  });
  it('accepts ordinary direction, trimmed', () => {
    expect(localVerdict('  calm, smiling, nods now and then ')).toEqual({
      ok: true,
      text: 'calm, smiling, nods now and then',
    });
    expect(localVerdict('x'.repeat(1200)).ok).toBe(true);
  });
  it('refuses empty, over 1,200 characters (UTF-16 units) and disallowed content, whole words only', () => {
    expect(localVerdict('  ').ok).toBe(false);
    expect(localVerdict('😀'.repeat(601)).ok).toBe(false);
    expect(localVerdict('slowly Undressing').ok).toBe(false);
    expect(localVerdict('self harm').ok).toBe(false);
    expect(localVerdict('Sussex accent, nods').ok).toBe(true);
  });
});

describe('moderation endpoint screen', () => {
  it('passes what moderation passes and refuses what it flags, naming the categories; local rules still first', async () => {
    calls = [];
    const screen = new ModerationPromptScreen(`${base}/moderations`, 'sk-test', log);
    expect(await screen.screen(' nod slowly ')).toEqual({ ok: true, text: 'nod slowly' });
    const flagged = await screen.screen('punch the camera');
    expect(flagged).toMatchObject({ ok: false });
    expect((flagged as { reason: string }).reason).toMatch(/violence/);
    expect((await screen.screen('naked')).ok).toBe(false);
    expect(calls).toEqual([
      { input: 'nod slowly', auth: 'Bearer sk-test' },
      { input: 'punch the camera', auth: 'Bearer sk-test' },
    ]);
  });

  it('fails closed with 503 clip_screen_unavailable when unreachable, erroring or unreadable', async () => {
    for (const url of ['http://127.0.0.1:1/moderations', `${base}/broken`, `${base}/garbage`]) {
      const err = await new ModerationPromptScreen(url, undefined, log, 2000).screen('nod').catch((e: unknown) => e);
      expect(err, url).toBeInstanceOf(ApiError);
      expect((err as ApiError).code).toBe('clip_screen_unavailable');
      expect((err as ApiError).status).toBe(503);
    }
  });
});

describe('PUT /avatars/{id}/loop with an unreachable moderation endpoint', () => {
  let t: TestApi;
  beforeAll(async () => {
    t = await testApi({ env: { MODERATION_URL: 'http://127.0.0.1:1/moderations' } });
  });
  afterAll(() => t.close());

  it('error: 503 clip_screen_unavailable, retryable, nothing written or billed', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    await t.services
      .sql`insert into assets (id, tenant_id, kind, status) values ('ast_screen', ${tenantId}, 'image', 'ready')`;
    await t.services.sql`
      insert into avatars (id, tenant_id, display_name, source_asset_id, status, idle_video_status, cache_version)
      values ('ava_screened', ${tenantId}, 's', 'ast_screen', 'ready', 'ready', 1)`;
    const res = await t.request('PUT', '/api/v1/avatars/ava_screened/loop', {
      key: apiKey,
      body: { motionPrompt: 'nod' },
      headers: { 'idempotency-key': 'k1' },
    });
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ code: 'clip_screen_unavailable', retryable: true });
    const [a] = await t.services.sql`select idle_video_status, generation_id from avatars where id = 'ava_screened'`;
    expect(a).toMatchObject({ idle_video_status: 'ready', generation_id: null });
    expect((await t.services.ledger.balance(tenantId)).reservedCreditMicros).toBe(0);
    // The key was freed: a retry with it runs again (and fails the same way here).
    expect(
      (
        await t.request('PUT', '/api/v1/avatars/ava_screened/loop', {
          key: apiKey,
          body: { motionPrompt: 'nod' },
          headers: { 'idempotency-key': 'k1' },
        })
      ).status,
    ).toBe(503);
  });
});
