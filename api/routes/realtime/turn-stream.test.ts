/**
 * The turn stream over a real HTTP server (api/server.ts, as `npm start` serves it): it streams
 * (the first media leave while the answer is still being written), and a client that leaves
 * mid-stream stops the render and pays only for what was delivered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readAvatarMux, type AvatarMuxRecord } from '../../../client/index.ts';
import type { TurnSummary } from '../../../core/realtime/index.ts';
import { closeTts, normalizeText, splitSentences, synthesize } from '../../../render/tts/index.ts';
import { startFakeOpenAI } from '../../../test/fakes/openai.ts';
import { testApi, waitFor } from '../../../test/helpers.ts';
import { readyAvatar } from '../../../test/realtime.ts';
import { startApiServer, type ApiServer } from '../../server.ts';

const llm = await startFakeOpenAI();
const t = await testApi({ env: { OPENAI_BASE_URL: llm.baseUrl, LLM_MODEL: 'fake-llm' } });
let server: ApiServer;
let base = '';
const ended: TurnSummary[] = [];
beforeAll(async () => {
  server = await startApiServer(t.app.fetch, { port: 0, hostname: '127.0.0.1' });
  base = `http://127.0.0.1:${server.port}`;
  t.services.turns.events.on('ended', (s) => ended.push(s));
});
afterAll(async () => {
  await server.close({ timeoutMs: 1000 });
  await t.close();
  await llm.close();
  await closeTts();
});

function post(key: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${base}/api/v1/realtime/turn`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

describe('the turn stream over HTTP', () => {
  it('streams: the header, audio and first frames arrive while the LLM is still writing the answer', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const firstPart = 'Here is the first sentence. ';
    expect(firstPart.length % 4).toBe(0);
    llm.script = { chat: () => ({ text: `${firstPart}And then the rest arrives. Finally, the end.`, chunkChars: 4, holdAfter: { chars: firstPart.length, until: held } }) };
    const res = await post(apiKey, { avatar_id: avatarId, mode: 'talk', text: 'Tell me.' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    const seen: AvatarMuxRecord[] = [];
    let released = false;
    for await (const r of readAvatarMux(res.body!)) {
      seen.push(r);
      if (r.type === 'video' && !released) {
        // A lip-synced frame of the first sentence is here, and the LLM has not sent the rest yet.
        expect(seen.some((x) => x.type === 'header')).toBe(true);
        expect(seen.some((x) => x.type === 'audio')).toBe(true);
        expect(ended).not.toContainEqual(expect.objectContaining({ avatarId }));
        released = true;
        release();
      }
    }
    expect(released).toBe(true);
    expect(seen[seen.length - 1]!.type).toBe('end');
    const said = seen.filter((r) => r.type === 'event' && r.name === 'speech_start').map((r) => (r as { data: { text: string } }).data.text);
    expect(said).toEqual(['Here is the first sentence.', 'And then the rest arrives.', 'Finally, the end.']);
  }, 60_000);

  it('a client that leaves mid-stream stops the render and is billed only the audio delivered', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 400 });
    const { avatarId } = await readyAvatar(t, tenantId);
    // About two minutes of speech: far more than the connection's buffers hold.
    const text = Array.from({ length: 40 }, (_, i) => `This is sentence number ${i + 1} of a long speech.`).join(' ');
    const res = await post(apiKey, { avatar_id: avatarId, mode: 'repeat', text });
    expect(res.status).toBe(200);
    const turnId = res.headers.get('x-turn-id')!;
    let heard = 0;
    let frames = 0;
    for await (const r of readAvatarMux(res.body!)) {
      if (r.type === 'audio') heard += r.sampleCount;
      if (r.type === 'video' && ++frames === 10) break; // leaving the loop cancels the body: the connection closes
    }
    const summary = await waitFor('the turn to end', () => ended.find((s) => s.turnId === turnId));
    const sentences = splitSentences(normalizeText(text));
    const first = await synthesize({ text: sentences[0]! });
    const total = sentences.length * first.samples.length; // a lower bound is enough: every sentence is at least this long here
    expect(summary.outcome).toBe('client_closed');
    expect(summary.deliveredAudioSamples).toBeGreaterThanOrEqual(heard);
    expect(summary.deliveredAudioSamples).toBeLessThan(total / 2);
    expect(summary.frames).toBeLessThan((total / 2 / 16000) * 25);
    const charge = Math.round((summary.deliveredAudioSamples * 1000) / 16000) * 1000;
    expect(summary.usage).toEqual({ status: 'released', billedCreditMicros: charge });
    expect(await t.services.ledger.balance(tenantId)).toMatchObject({ balanceCreditMicros: 400_000_000 - charge, reservedCreditMicros: 0 });
    const [row] = await t.services.sql<{ status: string; billed_credit_micros: number }[]>`select status, billed_credit_micros from session_usage where id = ${turnId}`;
    expect(row).toEqual({ status: 'released', billed_credit_micros: charge });
  }, 120_000);

  it('a client that leaves while the LLM has not answered yet stops the turn: nothing is billed', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    const before = llm.chatRequests.length;
    llm.script = { chat: () => ({ hang: true }) };
    const controller = new AbortController();
    const pending = post(apiKey, { avatar_id: avatarId, mode: 'talk', text: 'Hello?' }, controller.signal).catch((e: unknown) => e);
    await waitFor('the LLM to be asked', () => (llm.chatRequests.length > before ? true : undefined));
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
    const row = await waitFor('the turn to be settled', async () => {
      const [r] = await t.services.sql<{ status: string; billed_credit_micros: number }[]>`select status, billed_credit_micros from session_usage where tenant_id = ${tenantId}`;
      return r && r.status !== 'reserved' ? r : undefined;
    });
    expect(row).toEqual({ status: 'failed', billed_credit_micros: 0 });
    expect(await t.services.ledger.balance(tenantId)).toMatchObject({ balanceCreditMicros: 100_000_000, reservedCreditMicros: 0 });
  }, 60_000);
});
