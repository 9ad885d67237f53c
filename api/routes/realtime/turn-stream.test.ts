/**
 * The turn stream over a real HTTP server (api/server.ts, as `npm start` serves it): it streams
 * (the first media leave while the answer is still being written), and a client that leaves
 * mid-stream stops the render and pays only for what was delivered.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
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
  it('happy: streams: the header, audio and first frames arrive while the LLM is still writing the answer', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const firstPart = 'Here is the first sentence. ';
    expect(firstPart.length % 4).toBe(0);
    llm.script = {
      chat: () => ({
        text: `${firstPart}And then the rest arrives. Finally, the end.`,
        chunkChars: 4,
        holdAfter: { chars: firstPart.length, until: held },
      }),
    };
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
    const said = seen
      .filter((r) => r.type === 'event' && r.name === 'speech_start')
      .map((r) => (r as { data: { text: string } }).data.text);
    expect(said).toEqual(['Here is the first sentence.', 'And then the rest arrives.', 'Finally, the end.']);
  }, 60_000);

  it('happy: a client that leaves mid-stream stops the render and is billed only the audio delivered', async () => {
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
    expect(await t.services.ledger.balance(tenantId)).toMatchObject({
      balanceCreditMicros: 400_000_000 - charge,
      reservedCreditMicros: 0,
    });
    const [row] = await t.services.sql<
      { status: string; billed_credit_micros: number }[]
    >`select status, billed_credit_micros from session_usage where id = ${turnId}`;
    expect(row).toEqual({ status: 'released', billed_credit_micros: charge });
  }, 120_000);

  it('happy: a client that leaves while the LLM has not answered yet stops the turn: nothing is billed', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    const before = llm.chatRequests.length;
    llm.script = { chat: () => ({ hang: true }) };
    const controller = new AbortController();
    const pending = post(apiKey, { avatar_id: avatarId, mode: 'talk', text: 'Hello?' }, controller.signal).catch(
      (e: unknown) => e,
    );
    await waitFor('the LLM to be asked', () => (llm.chatRequests.length > before ? true : undefined));
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
    const row = await waitFor('the turn to be settled', async () => {
      const [r] = await t.services.sql<
        { status: string; billed_credit_micros: number }[]
      >`select status, billed_credit_micros from session_usage where tenant_id = ${tenantId}`;
      return r && r.status !== 'reserved' ? r : undefined;
    });
    expect(row).toEqual({ status: 'failed', billed_credit_micros: 0 });
    expect(await t.services.ledger.balance(tenantId)).toMatchObject({
      balanceCreditMicros: 100_000_000,
      reservedCreditMicros: 0,
    });
  }, 60_000);

  /**
   * A raw connection that sends a turn, reads the response head and then nothing: `resume()` reads
   * the rest (the body de-chunked), `closed` resolves when the server closes the connection.
   */
  function stuckTurn(key: string, body: unknown) {
    const socket = net.connect(server.port, '127.0.0.1');
    const json = JSON.stringify(body);
    const chunks: Buffer[] = [];
    let head = '';
    const headRead = new Promise<void>((resolve) => {
      socket.on('data', (d: Buffer) => {
        chunks.push(d);
        const all = Buffer.concat(chunks);
        const at = all.indexOf('\r\n\r\n');
        if (!head && at !== -1) {
          head = all.subarray(0, at).toString('latin1');
          socket.pause();
          resolve();
        }
      });
    });
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => {});
    socket.write(
      `POST /api/v1/realtime/turn HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`,
    );
    const bodyBytes = () => {
      const all = Buffer.concat(chunks);
      let rest = all.subarray(all.indexOf('\r\n\r\n') + 4);
      const parts: Buffer[] = [];
      for (;;) {
        const eol = rest.indexOf('\r\n');
        const size = parseInt(rest.subarray(0, eol).toString('latin1'), 16);
        if (eol === -1 || !size) break;
        parts.push(rest.subarray(eol + 2, eol + 2 + size));
        rest = rest.subarray(eol + 2 + size + 2);
      }
      return Buffer.concat(parts);
    };
    return { headRead, closed, head: () => head, resume: () => socket.resume(), bodyBytes };
  }

  const LONG_SPEECH = Array.from({ length: 40 }, (_, i) => `This is sentence number ${i + 1} of a long speech.`).join(
    ' ',
  );

  /**
   * Runs `body` against a turn of LONG_SPEECH, with turns stalling after 1 s and the console watched
   * (a stall prints nothing); the turn is the client's, which reads nothing until it resumes.
   */
  async function stalledTurn(body: (turn: ReturnType<typeof stuckTurn>) => Promise<void>): Promise<void> {
    const { apiKey, tenantId } = await t.newTenant({ credits: 400 });
    const { avatarId } = await readyAvatar(t, tenantId);
    const printed = [vi.spyOn(console, 'error'), vi.spyOn(console, 'info'), vi.spyOn(console, 'log')];
    const stall = t.services.config.TURN_STALL_SECONDS;
    t.services.config.TURN_STALL_SECONDS = 1;
    try {
      await body(stuckTurn(apiKey, { avatar_id: avatarId, mode: 'repeat', text: LONG_SPEECH }));
      for (const spy of printed) expect(spy).not.toHaveBeenCalled();
    } finally {
      t.services.config.TURN_STALL_SECONDS = stall;
      for (const spy of printed) spy.mockRestore();
    }
  }

  it(
    'security: a client that stops reading is stopped: its stream ends with the mux ERROR record stream_stalled, nothing else, and nothing is printed',
    () =>
      stalledTurn(async (turn) => {
        await turn.headRead;
        expect(turn.head()).toMatch(/^HTTP\/1\.1 200 /);
        const turnId = /x-turn-id: (\S+)/i.exec(turn.head())![1]!;
        const summary = await waitFor('the turn to stall', () => ended.find((s) => s.turnId === turnId));
        expect(summary.outcome).toBe('stalled');
        // The client comes back: it reads what had reached its connection, then the ERROR record, and the connection closes.
        turn.resume();
        await turn.closed;
        const records: AvatarMuxRecord[] = [];
        for await (const r of readAvatarMux(new Response(turn.bodyBytes()).body!)) records.push(r);
        expect(records[0]!.type).toBe('header');
        expect(records.at(-1)).toMatchObject({ type: 'error', code: 'stream_stalled', retryable: true });
        expect(turn.bodyBytes().subarray(-200).toString('latin1')).not.toContain('Error:');
        expect(summary.usage?.status).toBe('released');
      }),
    120_000,
  );

  it(
    'security: a stalled client that takes nothing of the ERROR record either is disconnected, quietly',
    () =>
      stalledTurn(async (turn) => {
        await turn.headRead;
        const turnId = /x-turn-id: (\S+)/i.exec(turn.head())![1]!;
        expect((await waitFor('the turn to stall', () => ended.find((s) => s.turnId === turnId))).outcome).toBe(
          'stalled',
        );
        // The server lets go of the connection while the client still reads nothing.
        const open = () => new Promise<number>((resolve) => server.server.getConnections((_e, n) => resolve(n)));
        await waitFor('the server to close the connection', async () => ((await open()) === 0 ? true : undefined), {
          timeoutMs: 30_000,
        });
        turn.resume();
        await turn.closed;
        // What had reached the connection is all there is: no ERROR record was taken, and no text was added.
        expect(turn.bodyBytes().subarray(-200).toString('latin1')).not.toContain('Error:');
      }),
    120_000,
  );
});
