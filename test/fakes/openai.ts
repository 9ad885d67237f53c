import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import busboy from 'busboy';

/**
 * A local OpenAI-compatible server for tests: the LLM and STT are paid remote services, so the
 * suite talks to this instead, over the real wire protocol (the `openai` SDK and LiveKit's agents
 * plugin cannot tell the difference).
 *
 *   POST /v1/chat/completions      streamed (SSE chunks, `data: [DONE]`) or not; tool calls too
 *   POST /v1/audio/transcriptions  multipart (`file`, `model`, ...) → `{ "text": ... }`
 *   GET  /v1/models
 *
 * Answers are scripted per test (`script.chat`, `script.transcribe`), failures included (an HTTP
 * error, a hang, a stream cut mid-answer), and every request is recorded with what it was sent.
 */

export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
  name?: string;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  tools?: { type: 'function'; function: { name: string; description?: string; parameters?: unknown } }[];
  [extra: string]: unknown;
}

/** One scripted chat answer. */
export type ChatReply =
  | {
      text: string;
      /** Characters per streamed chunk (default 12). */ chunkChars?: number;
      /** Delay between chunks, ms. */ chunkDelayMs?: number;
      /** Streams the first `chars` characters, then waits for `until` before the rest (a test holds the answer mid-way). */
      holdAfter?: { chars: number; until: Promise<unknown> };
    }
  | { toolCalls: { name: string; arguments: Record<string, unknown> }[] }
  /** An HTTP error before any byte of the answer. */
  | { fail: { status: number; message?: string } }
  /** Streams `text` then drops the connection without finishing. */
  | { cutAfter: string }
  /** Never answers (until the client gives up or the server closes). */
  | { hang: true };

export type TranscriptionReply = { text: string } | { fail: { status: number; message?: string } } | { hang: true };

interface TranscriptionRequest {
  model: string;
  fields: Record<string, string>;
  audio: Buffer;
  filename: string;
}

/** Seconds of audio a transcription request uploaded (a WAV file, as agents-js sends it). */
export function wavSeconds(wav: Buffer): number {
  const rate = wav.readUInt32LE(24);
  const channels = wav.readUInt16LE(22);
  const bits = wav.readUInt16LE(34);
  const data = wav.indexOf('data', 12);
  const bytes = data >= 0 ? wav.readUInt32LE(data + 4) : wav.length - 44;
  return bytes / (rate * channels * (bits / 8));
}

export interface FakeOpenAIScript {
  /** The answer to a chat request; default: echoes the last user message. */
  chat?: (req: ChatRequest) => ChatReply | Promise<ChatReply>;
  /** The answer to a transcription request; default: an empty transcript. */
  transcribe?: (req: TranscriptionRequest) => TranscriptionReply | Promise<TranscriptionReply>;
}

export interface FakeOpenAI {
  /** Base URL to give as OPENAI_BASE_URL (ends in /v1). */
  baseUrl: string;
  readonly chatRequests: ChatRequest[];
  readonly transcriptionRequests: TranscriptionRequest[];
  script: FakeOpenAIScript;
  close(): Promise<void>;
}

/** The text of a message's content (a string, or the text parts of a content array). */
export function messageText(m: ChatMessage): string {
  if (typeof m.content === 'string') return m.content;
  if (Array.isArray(m.content)) {
    return m.content
      .map((p: { type?: string; text?: string }) => (p?.type === 'text' && typeof p.text === 'string' ? p.text : ''))
      .join('');
  }
  return '';
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, status: number, message = 'scripted failure'): void {
  sendJson(res, status, { error: { message, type: 'server_error', code: null } });
}

function readMultipart(
  req: IncomingMessage,
): Promise<{ fields: Record<string, string>; file: Buffer; filename: string }> {
  return new Promise((resolve, reject) => {
    const fields: Record<string, string> = {};
    let file = Buffer.alloc(0);
    let filename = '';
    const bb = busboy({ headers: req.headers });
    bb.on('field', (name: string, value: string) => (fields[name] = value));
    bb.on('file', (_name, stream, info) => {
      filename = info.filename ?? '';
      const parts: Buffer[] = [];
      stream.on('data', (d: Buffer) => parts.push(d));
      stream.on('end', () => (file = Buffer.concat(parts)));
    });
    bb.on('close', () => resolve({ fields, file, filename }));
    bb.on('error', reject);
    req.pipe(bb);
  });
}

let completionSeq = 0;

async function answerChat(req: ChatRequest, reply: ChatReply, res: ServerResponse): Promise<void> {
  if ('fail' in reply) return sendError(res, reply.fail.status, reply.fail.message);
  if ('hang' in reply) return; // the socket stays open; close() destroys it
  const id = `chatcmpl-fake-${++completionSeq}`;
  const created = Math.floor(Date.now() / 1000);
  const base = { id, object: 'chat.completion.chunk', created, model: req.model };

  if (!req.stream) {
    const message =
      'toolCalls' in reply
        ? {
            role: 'assistant',
            content: null,
            tool_calls: reply.toolCalls.map((t, i) => ({
              id: `call_${completionSeq}_${i}`,
              type: 'function',
              function: { name: t.name, arguments: JSON.stringify(t.arguments) },
            })),
          }
        : { role: 'assistant', content: 'text' in reply ? reply.text : reply.cutAfter };
    return sendJson(res, 200, {
      id,
      object: 'chat.completion',
      created,
      model: req.model,
      choices: [{ index: 0, message, finish_reason: 'toolCalls' in reply ? 'tool_calls' : 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
  }

  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  res.flushHeaders();
  const send = (chunk: unknown) => res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  send({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
  if ('toolCalls' in reply) {
    reply.toolCalls.forEach((t, i) =>
      send({
        ...base,
        choices: [
          {
            index: 0,
            delta: {
              tool_calls: [
                {
                  index: i,
                  id: `call_${completionSeq}_${i}`,
                  type: 'function',
                  function: { name: t.name, arguments: JSON.stringify(t.arguments) },
                },
              ],
            },
            finish_reason: null,
          },
        ],
      }),
    );
    send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] });
  } else {
    const text = 'text' in reply ? reply.text : reply.cutAfter;
    const size = ('chunkChars' in reply && reply.chunkChars) || 12;
    const hold = 'holdAfter' in reply ? reply.holdAfter : undefined;
    for (let i = 0; i < text.length; i += size) {
      if (hold && i >= hold.chars && i - size < hold.chars) await hold.until;
      send({ ...base, choices: [{ index: 0, delta: { content: text.slice(i, i + size) }, finish_reason: null }] });
      const delay = 'chunkDelayMs' in reply ? (reply.chunkDelayMs ?? 0) : 0;
      if (delay > 0) await sleep(delay);
    }
    if ('cutAfter' in reply) {
      // Let what was written reach the client, then drop the connection mid-answer.
      await sleep(50);
      res.socket?.destroy();
      return;
    }
    send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
  }
  send({ ...base, choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
  res.end('data: [DONE]\n\n');
}

/** Starts the fake on a free loopback port. */
export async function startFakeOpenAI(script: FakeOpenAIScript = {}): Promise<FakeOpenAI> {
  const chatRequests: ChatRequest[] = [];
  const transcriptionRequests: TranscriptionRequest[] = [];
  const state = { script };

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const route = `${req.method} ${url.pathname.replace(/^\/v1/, '')}`;
    void (async () => {
      try {
        if (route === 'GET /models')
          return sendJson(res, 200, {
            object: 'list',
            data: [
              { id: 'fake-llm', object: 'model' },
              { id: 'fake-stt', object: 'model' },
            ],
          });
        if (route === 'POST /chat/completions') {
          const body = JSON.parse((await readBody(req)).toString('utf8')) as ChatRequest;
          chatRequests.push(body);
          const last = [...body.messages].reverse().find((m) => m.role === 'user');
          const reply = state.script.chat
            ? await state.script.chat(body)
            : { text: `You said: ${last ? messageText(last) : ''}` };
          return await answerChat(body, reply, res);
        }
        if (route === 'POST /audio/transcriptions') {
          const { fields, file, filename } = await readMultipart(req);
          const tr: TranscriptionRequest = { model: fields.model ?? '', fields, audio: file, filename };
          transcriptionRequests.push(tr);
          const reply = state.script.transcribe ? await state.script.transcribe(tr) : { text: '' };
          if ('fail' in reply) return sendError(res, reply.fail.status, reply.fail.message);
          if ('hang' in reply) return;
          return sendJson(res, 200, { text: reply.text });
        }
        sendError(res, 404, `no route ${route}`);
      } catch (err) {
        if (!res.headersSent) sendError(res, 400, err instanceof Error ? err.message : String(err));
        else res.destroy();
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    chatRequests,
    transcriptionRequests,
    get script() {
      return state.script;
    },
    set script(s: FakeOpenAIScript) {
      state.script = s;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
