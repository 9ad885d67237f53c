import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAI, type FakeOpenAI } from '../../../test/fakes/openai.ts';
import { StalledResponse, stallGuardedFetch } from './stall-guard.ts';

let fake: FakeOpenAI;
beforeAll(async () => {
  fake = await startFakeOpenAI();
});
afterAll(() => fake.close());

/** The OpenAI SDK as the agent builds it: its own timeout up to the response head, the guard after. */
const client = (idleMs: number) =>
  new OpenAI({ apiKey: 'k', baseURL: fake.baseUrl, maxRetries: 0, timeout: idleMs, fetch: stallGuardedFetch(idleMs) });

async function answer(c: OpenAI, onChunk?: () => Promise<void>): Promise<string> {
  const stream = await c.chat.completions.create({
    model: 'm',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });
  let text = '';
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    await onChunk?.();
  }
  return text;
}

describe('stallGuardedFetch', () => {
  it('fails a streamed answer that stops mid-way, once it has been silent for the limit', async () => {
    fake.script = {
      chat: () => ({
        text: 'Let me think about that for a while.',
        chunkChars: 5,
        holdAfter: { chars: 10, until: new Promise(() => {}) },
      }),
    };
    const t0 = performance.now();
    const err = await answer(client(300)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StalledResponse);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
  });

  it('lets an answer through whose pauses are shorter than the limit, and never counts a slow reader against the server', async () => {
    fake.script = { chat: () => ({ text: 'One, two, three, four, five.', chunkChars: 4, chunkDelayMs: 100 }) };
    expect(await answer(client(400))).toBe('One, two, three, four, five.');
    // The reader takes longer than the limit over each chunk: the server is not stalled.
    fake.script = { chat: () => ({ text: 'Slowly read.', chunkChars: 4 }) };
    expect(await answer(client(100), () => new Promise((r) => setTimeout(r, 250)))).toBe('Slowly read.');
  });

  it('keeps errors and non-streamed answers as they are', async () => {
    fake.script = { chat: () => ({ fail: { status: 503, message: 'overloaded' } }) };
    const err = await answer(client(500)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    fake.script = { chat: () => ({ text: 'Whole.' }) };
    const whole = await client(500).chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(whole.choices[0]?.message.content).toBe('Whole.');
  });
});
