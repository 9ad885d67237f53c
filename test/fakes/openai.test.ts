import { afterAll, describe, expect, it } from 'vitest';
import { messageText, startFakeOpenAI } from './openai.ts';

const fake = await startFakeOpenAI();
afterAll(() => fake.close());

/** The content deltas and tool calls of an SSE chat stream, as an OpenAI client reads them. */
async function readStream(res: Response) {
  const text = await res.text();
  const events = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  expect(events.at(-1)).toBe('[DONE]');
  const chunks = events.slice(0, -1).map(
    (e) =>
      JSON.parse(e) as {
        choices: {
          delta: { content?: string; tool_calls?: { function: { name: string; arguments: string } }[] };
          finish_reason: string | null;
        }[];
      },
  );
  const content = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? '')).join('');
  const tools = chunks.flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? [])).map((t) => t.function);
  const finish = chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter(Boolean);
  return { content, tools, finish };
}

const chat = (body: unknown) =>
  fetch(`${fake.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('fake OpenAI-compatible server', () => {
  it('streams a scripted chat answer in chunks and records what it was sent', async () => {
    fake.script = {
      chat: (req) => ({ text: `Hi ${messageText(req.messages.at(-1)!)}, nice to meet you.`, chunkChars: 5 }),
    };
    const res = await chat({
      model: 'm',
      stream: true,
      messages: [
        { role: 'system', content: 'be kind' },
        { role: 'user', content: 'Ada' },
      ],
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const { content, finish } = await readStream(res);
    expect(content).toBe('Hi Ada, nice to meet you.');
    expect(finish).toEqual(['stop']);
    expect(fake.chatRequests.at(-1)?.messages[0]).toEqual({ role: 'system', content: 'be kind' });
  });

  it('holds a streamed answer mid-way until the test releases it', async () => {
    let release!: () => void;
    const until = new Promise<void>((r) => (release = r));
    fake.script = {
      chat: () => ({ text: 'First part. Second part.', chunkChars: 4, holdAfter: { chars: 12, until } }),
    };
    const res = await chat({ model: 'm', stream: true, messages: [] });
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let seen = '';
    const content = () => [...seen.matchAll(/"content":"([^"]*)"/g)].map((m) => m[1]).join('');
    while (content().length < 12) seen += (await reader.read()).value ?? '';
    expect(content()).toBe('First part. '); // and nothing more: the rest waits
    const pending = reader.read();
    expect(await Promise.race([pending.then(() => 'more'), new Promise((r) => setImmediate(() => r('held')))])).toBe(
      'held',
    );
    release();
    for (let next = pending; ; next = reader.read()) {
      const { done, value } = await next;
      if (done) break;
      seen += value;
    }
    expect(content()).toBe('First part. Second part.');
  });

  it('streams tool calls, answers non-streamed requests, and fails or cuts as scripted', async () => {
    fake.script = { chat: () => ({ toolCalls: [{ name: 'play_action', arguments: { action: 'wave' } }] }) };
    const tools = await readStream(await chat({ model: 'm', stream: true, messages: [] }));
    expect(tools.tools).toEqual([{ name: 'play_action', arguments: '{"action":"wave"}' }]);
    expect(tools.finish).toEqual(['tool_calls']);

    fake.script = { chat: () => ({ text: 'plain' }) };
    const plain = (await (await chat({ model: 'm', messages: [] })).json()) as {
      choices: { message: { content: string } }[];
    };
    expect(plain.choices[0]!.message.content).toBe('plain');

    fake.script = { chat: () => ({ fail: { status: 503, message: 'overloaded' } }) };
    const failed = await chat({ model: 'm', stream: true, messages: [] });
    expect(failed.status).toBe(503);

    fake.script = { chat: () => ({ cutAfter: 'Half a sen' }) };
    const cut = await chat({ model: 'm', stream: true, messages: [] });
    await expect(cut.text()).rejects.toThrow();
  });

  it('transcribes multipart audio with the scripted text and keeps the audio', async () => {
    fake.script = { transcribe: (req) => ({ text: `heard ${req.audio.length} bytes with ${req.model}` }) };
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(1234)], { type: 'audio/wav' }), 'audio.wav');
    form.append('model', 'whisper-1');
    form.append('response_format', 'json');
    const res = await fetch(`${fake.baseUrl}/audio/transcriptions`, { method: 'POST', body: form });
    expect(await res.json()).toEqual({ text: 'heard 1234 bytes with whisper-1' });
    expect(fake.transcriptionRequests.at(-1)).toMatchObject({
      model: 'whisper-1',
      filename: 'audio.wav',
      fields: { response_format: 'json' },
    });
  });
});
