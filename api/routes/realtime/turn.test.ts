/**
 * POST /realtime/turn with the real TTS, renderer, frame cache and PostgreSQL; the LLM is the local
 * OpenAI-compatible fake. Every stream is decoded with readAvatarMux.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { AvatarMuxRecord, MuxAudioChunk, MuxEvent, MuxHeader, MuxVideoFrame } from '../../../client/index.ts';
import { messageText, startFakeOpenAI } from '../../../test/fakes/openai.ts';
import { json, testApi, type TestApi } from '../../../test/helpers.ts';
import { readTurn, readyAvatar, TEST_LOOP, testLoopDir } from '../../../test/realtime.ts';
import { openFrameCache } from '../../../render/framecache/index.ts';
import { framePts } from '../../../render/encode/index.ts';
import { closeTts, normalizeText, splitSentences, synthesize, VOICES, type Voice } from '../../../render/tts/index.ts';
import { CONVERSATION_MAX_MESSAGES, loopFrameAt } from '../../../core/realtime/index.ts';

const llm = await startFakeOpenAI();
const t = await testApi({
  env: { OPENAI_BASE_URL: llm.baseUrl, OPENAI_API_KEY: 'sk-test', LLM_MODEL: 'fake-llm', LLM_TIMEOUT_SECONDS: '2' },
});
afterAll(async () => {
  await t.close();
  await llm.close();
  await closeTts();
});

const TURN = '/api/v1/realtime/turn';
const MICROS = 1_000_000;

/** The speech of `text` as the turn speaks it: its sentences, one Flite call each, back to back. */
async function speechOf(text: string, voice: Voice = 'slt'): Promise<{ samples: number; sentences: string[] }> {
  const sentences = splitSentences(normalizeText(text));
  let samples = 0;
  for (const s of sentences) samples += (await synthesize({ text: s, voice })).samples.length;
  return { samples, sentences };
}

/** The ms-exact charge of `samples` of audio (usage settles to the millisecond). */
const chargeOf = (samples: number, rate: number) => Math.round((samples * 1000) / rate) * 1000;

async function turn(api: TestApi, key: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await api.request('POST', TURN, { key, body, headers });
  return res;
}

interface Decoded {
  header: MuxHeader;
  audio: MuxAudioChunk[];
  frames: MuxVideoFrame[];
  events: MuxEvent[];
  last: AvatarMuxRecord;
  samples: number;
}

function split(records: AvatarMuxRecord[]): Decoded {
  const header = records[0] as MuxHeader;
  const audio = records.filter((r): r is MuxAudioChunk => r.type === 'audio');
  return {
    header,
    audio,
    frames: records.filter((r): r is MuxVideoFrame => r.type === 'video'),
    events: records.filter((r): r is MuxEvent => r.type === 'event'),
    last: records[records.length - 1]!,
    samples: audio.reduce((s, a) => s + a.sampleCount, 0),
  };
}

/** Frames on the grid at the loop's fps, on the audio clock, one per frame slot up to the end of the audio. */
function expectOnGrid(d: Decoded, rate: number): void {
  expect(d.header.tracks[1]).toMatchObject({
    kind: 'video',
    codec: 'jpeg',
    fps: TEST_LOOP.fps,
    width: TEST_LOOP.size,
    height: TEST_LOOP.size,
  });
  expect(d.frames.length).toBe(Math.ceil((d.samples * TEST_LOOP.fps) / rate));
  d.frames.forEach((f, k) => expect(f.pts).toBe(framePts(k, rate, TEST_LOOP.fps, 1)));
}

async function usageRows(tenantId: string) {
  return t.services.sql<
    { id: string; status: string; billed_credit_micros: number; billable_ms: number; kind: string }[]
  >`
    select id, status, billed_credit_micros, billable_ms, kind from session_usage where tenant_id = ${tenantId} order by created_at`;
}

describe('repeat turns', () => {
  it('happy: speak the text verbatim on the idle loop: audio is the speech, frames at the loop fps on the audio clock, billed by the second', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    const text = 'Hello there. I am glad you came by today!';
    const res = await turn(t, apiKey, { avatar_id: avatarId, mode: 'repeat', text });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    const turnId = res.headers.get('x-turn-id');
    expect(turnId).toMatch(/^ses_/);
    const d = split(await readTurn(res.body));

    const want = await speechOf(text);
    expect(d.header.clockRate).toBe(16000);
    expect(d.header.tracks[0]).toMatchObject({ kind: 'audio', codec: 'pcm_s16le', sampleRate: 16000, channels: 1 });
    expect(d.header.metadata).toMatchObject({ turn_id: turnId, avatar_id: avatarId, mode: 'repeat', voice: 'slt' });
    expect(d.samples).toBe(want.samples);
    expectOnGrid(d, 16000);
    expect(d.last).toMatchObject({ type: 'end', durationSamples: want.samples });
    expect(d.events.filter((e) => e.name === 'speech_start').map((e) => (e.data as { text: string }).text)).toEqual(
      want.sentences,
    );

    // The body starts at the cursor: the loop frame of the avatar's clock when the turn started.
    const cursor = d.header.metadata.cursor as {
      clip_id: string;
      frame: number;
      frame_count: number;
      fps: number;
      clock_ms: number;
    };
    expect(cursor).toMatchObject({
      clip_id: 'source',
      frame_count: TEST_LOOP.seconds * TEST_LOOP.fps,
      fps: TEST_LOOP.fps,
    });
    expect(cursor.frame).toBe(loopFrameAt(cursor.clock_ms, cursor.fps, cursor.frame_count));

    const charge = chargeOf(want.samples, 16000);
    const balance = await t.services.ledger.balance(tenantId);
    expect(balance).toMatchObject({ balanceCreditMicros: 100 * MICROS - charge, reservedCreditMicros: 0 });
    expect(await usageRows(tenantId)).toEqual([
      { id: turnId, kind: 'turn', status: 'released', billed_credit_micros: charge, billable_ms: charge / 1000 },
    ]);
  }, 60_000);

  it("happy: speaks with the avatar's Flite voice (defaultVoiceId), on that voice's clock", async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId, { defaultVoiceId: 'kal' });
    const text = 'Good morning.';
    const d = split(await readTurn((await turn(t, apiKey, { avatar_id: avatarId, mode: 'repeat', text })).body));
    expect(VOICES.kal.sampleRate).toBe(8000);
    expect(d.header).toMatchObject({ clockRate: 8000, metadata: { voice: 'kal' } });
    expect(d.samples).toBe((await speechOf(text, 'kal')).samples);
    expectOnGrid(d, 8000);
  }, 60_000);

  it('happy: consecutive turns continue the body: each starts on the loop frame of its cursor', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    const cache = await openFrameCache(await testLoopDir());
    const starts: number[] = [];
    for (let i = 0; i < 2; i++) {
      const d = split(
        await readTurn((await turn(t, apiKey, { avatar_id: avatarId, mode: 'repeat', text: 'Yes.' })).body),
      );
      const cursor = d.header.metadata.cursor as { frame: number; clock_ms: number };
      // Speech starts after a pause: the first frame is the stored loop frame at the cursor, untouched.
      expect(Buffer.from(d.frames[0]!.data).equals(Buffer.from(cache.encoded(cursor.frame)))).toBe(true);
      starts.push(cursor.clock_ms);
    }
    expect(starts[1]).toBeGreaterThanOrEqual(starts[0]!);
  }, 60_000);
});

describe('talk turns', () => {
  it("happy: answer through the LLM with the avatar's persona, speaking the answer sentence by sentence", async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId, {
      displayName: 'Grace',
      personality: 'A rear admiral who loves compilers.',
    });
    const answer = 'Hello! I wrote the first compiler. Ask me anything.';
    llm.script = { chat: () => ({ text: answer, chunkChars: 5 }) };
    const before = llm.chatRequests.length;
    const res = await turn(t, apiKey, { avatar_id: avatarId, mode: 'talk', text: 'Who are you?' });
    expect(res.status).toBe(200);
    const d = split(await readTurn(res.body));
    const sent = llm.chatRequests.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ model: 'fake-llm', stream: true });
    expect(sent[0]!.messages[0]!.role).toBe('system');
    expect(messageText(sent[0]!.messages[0]!)).toContain('You are Grace');
    expect(messageText(sent[0]!.messages[0]!)).toContain('A rear admiral who loves compilers.');
    expect(sent[0]!.messages.slice(1)).toEqual([{ role: 'user', content: 'Who are you?' }]);

    const want = await speechOf(answer);
    expect(d.events.filter((e) => e.name === 'speech_start').map((e) => (e.data as { text: string }).text)).toEqual(
      want.sentences,
    );
    expect(d.samples).toBe(want.samples);
    expectOnGrid(d, 16000);
    expect(d.last).toMatchObject({ type: 'end', durationSamples: want.samples });
    const charge = chargeOf(want.samples, 16000);
    expect(await t.services.ledger.balance(tenantId)).toMatchObject({
      balanceCreditMicros: 100 * MICROS - charge,
      reservedCreditMicros: 0,
    });
    expect((await usageRows(tenantId))[0]).toMatchObject({ status: 'released', billed_credit_micros: charge });
  }, 60_000);

  it('happy: keeps the conversation server-side per conversation_id: the LLM gets the history, bounded, and another id starts afresh', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 200 });
    const { avatarId } = await readyAvatar(t, tenantId);
    let n = 0;
    llm.script = { chat: () => ({ text: `Answer number ${++n}.` }) };
    const before = llm.chatRequests.length;
    const talk = async (text: string, conversation_id?: string) => {
      const res = await turn(t, apiKey, {
        avatar_id: avatarId,
        mode: 'talk',
        text,
        ...(conversation_id ? { conversation_id } : {}),
      });
      expect(res.status).toBe(200);
      expect(split(await readTurn(res.body)).last.type).toBe('end');
    };
    await talk('First question?', 'conv-1');
    await talk('Second question?', 'conv-1');
    await talk('Unrelated?', 'conv-2');
    await talk('No memory?');
    const sent = llm.chatRequests.slice(before).map((r) => r.messages.slice(1));
    expect(sent[1]).toEqual([
      { role: 'user', content: 'First question?' },
      { role: 'assistant', content: 'Answer number 1.' },
      { role: 'user', content: 'Second question?' },
    ]);
    expect(sent[2]).toEqual([{ role: 'user', content: 'Unrelated?' }]);
    expect(sent[3]).toEqual([{ role: 'user', content: 'No memory?' }]);
    // A repeat turn in the conversation is part of it (what the avatar said).
    const r = await turn(t, apiKey, {
      avatar_id: avatarId,
      mode: 'repeat',
      text: 'By the way, I like tea.',
      conversation_id: 'conv-1',
    });
    await readTurn(r.body);
    await talk('And now?', 'conv-1');
    expect(llm.chatRequests[llm.chatRequests.length - 1]!.messages.slice(-2)).toEqual([
      { role: 'assistant', content: 'By the way, I like tea.' },
      { role: 'user', content: 'And now?' },
    ]);
    // Bounded: the stored history never holds more than the last CONVERSATION_MAX_MESSAGES messages.
    await t.services.sql`
      update realtime_conversations set messages = ${t.services.sql.json(Array.from({ length: 40 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i}.` })) as never)}
      where conversation_id = 'conv-1'`;
    await talk('Last?', 'conv-1');
    const last = llm.chatRequests[llm.chatRequests.length - 1]!.messages;
    expect(last.slice(1, -1)).toHaveLength(CONVERSATION_MAX_MESSAGES);
    expect(last[last.length - 2]).toEqual({ role: 'assistant', content: 'm39.' });
    const [stored] = await t.services.sql<
      { messages: unknown[] }[]
    >`select messages from realtime_conversations where conversation_id = 'conv-1'`;
    expect(stored!.messages).toHaveLength(CONVERSATION_MAX_MESSAGES);
  }, 120_000);

  it('error: an LLM failing before its first word answers 502 upstream_unreachable (504 when it says nothing), nothing billed', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    for (const [reply, status, code] of [
      [{ fail: { status: 500, message: 'model overloaded' } }, 502, 'upstream_unreachable'],
      [{ fail: { status: 401, message: 'bad key' } }, 502, 'upstream_unreachable'],
      [{ hang: true }, 504, 'upstream_timeout'],
    ] as const) {
      llm.script = { chat: () => reply };
      const res = await turn(t, apiKey, { avatar_id: avatarId, mode: 'talk', text: 'Hi?' });
      expect(res.status).toBe(status);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await json(res)).toMatchObject({ code, retryable: true });
    }
    expect(await t.services.ledger.balance(tenantId)).toMatchObject({
      balanceCreditMicros: 100 * MICROS,
      reservedCreditMicros: 0,
    });
    const rows = await usageRows(tenantId);
    expect(rows.map((r) => [r.status, r.billed_credit_micros])).toEqual([
      ['failed', 0],
      ['failed', 0],
      ['failed', 0],
    ]);
  }, 60_000);

  it('error: an LLM failing mid-answer ends the stream with the ERROR record, billing only what was delivered', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    llm.script = { chat: () => ({ cutAfter: 'This part arrives whole. This one is cut in the mid' }) };
    const res = await turn(t, apiKey, { avatar_id: avatarId, mode: 'talk', text: 'Go on.' });
    expect(res.status).toBe(200);
    const d = split(await readTurn(res.body));
    expect(d.last).toMatchObject({ type: 'error', code: 'upstream_unreachable', retryable: true });
    const first = await speechOf('This part arrives whole.');
    // The frames whose audio was complete went out; audio up to the last of them.
    expect(d.frames.length).toBe(Math.floor((first.samples * 25) / 16000));
    expect(d.samples).toBe(framePts(d.frames.length, 16000, 25, 1));
    const charge = chargeOf(d.samples, 16000);
    expect(await t.services.ledger.balance(tenantId)).toMatchObject({
      balanceCreditMicros: 100 * MICROS - charge,
      reservedCreditMicros: 0,
    });
    expect(await usageRows(tenantId)).toEqual([
      expect.objectContaining({ status: 'released', billed_credit_micros: charge }),
    ]);
  }, 60_000);
});

describe('refusals: answered before any byte of stream, nothing billed', () => {
  it('error: 402 insufficient_credits, 402 spend_limit_exceeded', async () => {
    const broke = await t.newTenant({ credits: 0 });
    const a = await readyAvatar(t, broke.tenantId);
    const res = await turn(t, broke.apiKey, { avatar_id: a.avatarId, mode: 'repeat', text: 'Hello there.' });
    expect(res.status).toBe(402);
    expect(await json(res)).toMatchObject({ code: 'insufficient_credits', billingUrl: '/platform/billing' });
    // A key limited to half a second cannot reserve a two-second sentence.
    const limited = await t.newTenant({ credits: 100, spendLimitCreditMicros: 500_000 });
    const b = await readyAvatar(t, limited.tenantId);
    const res2 = await turn(t, limited.apiKey, {
      avatar_id: b.avatarId,
      mode: 'repeat',
      text: 'Hello there, how are you doing today?',
    });
    expect(res2.status).toBe(402);
    expect(await json(res2)).toMatchObject({ code: 'spend_limit_exceeded' });
    expect(await usageRows(broke.tenantId)).toEqual([]);
    expect(await usageRows(limited.tenantId)).toEqual([]);
    expect(await t.services.ledger.balance(limited.tenantId)).toMatchObject({
      balanceCreditMicros: 100 * MICROS,
      reservedCreditMicros: 0,
    });
  });

  it('error: 404 for an unknown, deleted or other workspace avatar; 409 for one not ready', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const other = await t.newTenant({ credits: 100 });
    const theirs = await readyAvatar(t, other.tenantId);
    const deleted = await readyAvatar(t, tenantId);
    await t.services.sql`update avatars set deleted_at = now(), status = 'deleted' where id = ${deleted.avatarId}`;
    const generating = await readyAvatar(t, tenantId, { status: 'preprocessing' });
    for (const [avatarId, status] of [
      ['ava_doesnotexist', 404],
      ['not-an-avatar-id', 404],
      [theirs.avatarId, 404],
      [deleted.avatarId, 404],
      [generating.avatarId, 409],
    ] as const) {
      const res = await turn(t, apiKey, { avatar_id: avatarId, mode: 'repeat', text: 'Hello.' });
      expect(res.status, avatarId).toBe(status);
      const body = await json(res);
      if (status === 409) expect(body).toMatchObject({ code: 'avatar_state_conflict' });
      else expect(body).toMatchObject({ code: 'not_found' });
    }
    expect(await usageRows(tenantId)).toEqual([]);
  });

  it('error: 422 naming the field: wrong casing, unknown fields, missing ids, bad mode, blank, unspeakable or absurdly long text, a bad conversation_id', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    const ok = { avatar_id: avatarId, mode: 'repeat', text: 'Hello.' };
    const cases: [unknown, string | null][] = [
      [{ avatarId, mode: 'repeat', text: 'Hello.' }, 'avatar_id'], // mis-cased: the required field is missing
      [{ ...ok, conversationId: 'c1' }, 'conversationId'],
      [{ ...ok, Text: 'x' }, 'Text'],
      [{ ...ok, voice: 'kal' }, 'voice'],
      [{ mode: 'repeat', text: 'Hello.' }, 'avatar_id'],
      [{ avatar_id: avatarId, text: 'Hello.' }, 'mode'],
      [{ ...ok, mode: 'REPEAT' }, 'mode'],
      [{ ...ok, mode: 'sing' }, 'mode'],
      [{ ...ok, text: '' }, 'text'],
      [{ ...ok, text: '   \n ' }, 'text'],
      [{ ...ok, text: '?!...' }, 'text'],
      [{ ...ok, text: 'a'.repeat(2001) }, 'text'],
      [{ ...ok, text: 42 }, 'text'],
      [{ ...ok, conversation_id: 'has spaces' }, 'conversation_id'],
      [{ ...ok, conversation_id: 'x'.repeat(65) }, 'conversation_id'],
      [[ok], null],
    ];
    for (const [body, field] of cases) {
      const res = await turn(t, apiKey, body);
      const what = JSON.stringify(body).slice(0, 120);
      expect(res.status, what).toBe(422);
      expect((await json(res)).field, what).toBe(field);
    }
    const huge = await turn(t, apiKey, { ...ok, text: 'Hi '.repeat(100_000) });
    expect(huge.status).toBe(413);
    // At the limit is fine: 2,000 characters.
    const atLimit = await turn(t, apiKey, { ...ok, text: `Hi.${' '.repeat(1997)}` });
    expect(atLimit.status).toBe(200);
    await readTurn(atLimit.body);
    expect(await usageRows(tenantId)).toHaveLength(1);
  }, 120_000);

  it('error: 503 llm_not_configured for a talk turn when no LLM is set up (repeat still works)', async () => {
    const bare = await testApi();
    try {
      const { apiKey, tenantId } = await bare.newTenant({ credits: 100 });
      const { avatarId } = await readyAvatar(bare, tenantId);
      const res = await turn(bare, apiKey, { avatar_id: avatarId, mode: 'talk', text: 'Hi?' });
      expect(res.status).toBe(503);
      expect(await json(res)).toMatchObject({
        code: 'llm_not_configured',
        error: expect.stringMatching(/OPENAI_BASE_URL/),
      });
      const ok = await turn(bare, apiKey, { avatar_id: avatarId, mode: 'repeat', text: 'Hi.' });
      expect(ok.status).toBe(200);
      await readTurn(ok.body);
      expect(
        (await bare.services.sql`select status from session_usage where tenant_id = ${tenantId}`).map((r) => r.status),
      ).toEqual(['released']);
    } finally {
      await bare.close();
    }
  }, 60_000);
});

describe('Idempotency-Key', () => {
  it('error: any reuse of a key is 409 (same or another body), over 180 characters is 422, and a refused turn frees its key', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    const body = { avatar_id: avatarId, mode: 'repeat', text: 'Once.' };
    const first = await turn(t, apiKey, body, { 'idempotency-key': 'turn-1' });
    expect(first.status).toBe(200);
    await readTurn(first.body);
    for (const b of [body, { ...body, text: 'Twice.' }]) {
      const again = await turn(t, apiKey, b, { 'idempotency-key': 'turn-1' });
      expect(again.status).toBe(409);
      expect(await json(again)).toMatchObject({ code: 'idempotency_conflict' });
    }
    const long = await turn(t, apiKey, body, { 'idempotency-key': 'k'.repeat(181) });
    expect(long.status).toBe(422);
    expect((await json(long)).field).toBe('idempotency-key');
    // Refused before streaming (the LLM failed before its first word): the key is free for the retry.
    const talk = { avatar_id: avatarId, mode: 'talk', text: 'Hi?' };
    llm.script = { chat: () => ({ fail: { status: 503, message: 'busy' } }) };
    const refused = await turn(t, apiKey, talk, { 'idempotency-key': 'turn-2' });
    expect(refused.status).toBe(502);
    llm.script = { chat: () => ({ text: 'Hello.' }) };
    const retry = await turn(t, apiKey, talk, { 'idempotency-key': 'turn-2' });
    expect(retry.status).toBe(200);
    await readTurn(retry.body);
    expect((await usageRows(tenantId)).map((r) => r.status)).toEqual(['released', 'failed', 'released']);
  }, 60_000);
});

describe('the ledger under concurrent turns', () => {
  it('happy: moves by exactly the delivered seconds of every turn; every reservation is released', async () => {
    const { apiKey, tenantId } = await t.newTenant({ credits: 100 });
    const { avatarId } = await readyAvatar(t, tenantId);
    llm.script = { chat: () => ({ text: 'Fine, thanks. And you?' }) };
    const bodies = [
      { avatar_id: avatarId, mode: 'repeat', text: 'One, two, three.' },
      { avatar_id: avatarId, mode: 'repeat', text: 'The quick brown fox jumps over the lazy dog.' },
      { avatar_id: avatarId, mode: 'talk', text: 'How are you?' },
      { avatar_id: avatarId, mode: 'repeat', text: 'Yes.' },
    ];
    const results = await Promise.all(
      bodies.map(async (b) => {
        const res = await turn(t, apiKey, b);
        expect(res.status).toBe(200);
        return { id: res.headers.get('x-turn-id')!, d: split(await readTurn(res.body)) };
      }),
    );
    const rows = await usageRows(tenantId);
    expect(rows).toHaveLength(4);
    let total = 0;
    for (const { id, d } of results) {
      expect(d.last.type).toBe('end');
      const charge = chargeOf(d.samples, 16000);
      total += charge;
      expect(rows.find((r) => r.id === id)).toMatchObject({ status: 'released', billed_credit_micros: charge });
    }
    const balance = await t.services.ledger.balance(tenantId);
    expect(balance).toMatchObject({
      balanceCreditMicros: 100 * MICROS - total,
      reservedCreditMicros: 0,
      lifetimeUsedCreditMicros: total,
    });
    const [sum] = await t.services.sql<
      { s: string }[]
    >`select sum(amount_credit_micros) as s from credit_ledger where tenant_id = ${tenantId}`;
    expect(Number(sum!.s)).toBe(balance.balanceCreditMicros);
  }, 120_000);
});
