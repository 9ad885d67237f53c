import { initializeLogger } from '@livekit/agents';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { closeTts } from '../../render/tts/index.ts';
import { EmbeddedTTS } from './tts.ts';
import { warmReplyPath } from './warm.ts';

initializeLogger({ pretty: false, level: 'fatal' });
afterAll(() => closeTts());

describe("a voice process's warm-up", () => {
  it("runs a reply's code before any call: one transcription and one streamed chat on loopback, then a streamed synthesis", async () => {
    const requests: string[] = [];
    const client = (baseURL: string) =>
      new OpenAI({
        apiKey: 'warm',
        baseURL,
        maxRetries: 0,
        fetch: async (url, init) => {
          // (The SDK also fetches a `data:` URL of its own, which is not a request.)
          if (String(url).startsWith('http')) requests.push(`${init?.method ?? 'GET'} ${String(url)}`);
          return fetch(url, init);
        },
      });
    await warmReplyPath(client, new EmbeddedTTS(undefined, true));
    expect(requests).toHaveLength(2);
    expect(requests[0]).toMatch(/^POST http:\/\/127\.0\.0\.1:\d+\/v1\/audio\/transcriptions$/);
    expect(requests[1]).toMatch(/^POST http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions$/);
  });
});
