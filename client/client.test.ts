import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../api/server.ts';
import { fixtureBytes } from '../api/routes/avatars/test-support.ts';
import { png } from '../api/routes/assets/test-media.ts';
import { MICROS_PER_SECOND } from '../core/credits/ledger.ts';
import { AvatarMuxWriter, encodeJpeg } from '../render/encode/index.ts';
import { speechFromText } from '../render/talking-head/index.ts';
import { closeTts } from '../render/tts/index.ts';
import { speechWav } from '../test/audio.ts';
import { freePort } from '../test/deps.ts';
import { testApi, type TestApi } from '../test/helpers.ts';
import { ApiError, AvatarClient, type AvatarMuxRecord } from './index.ts';

/**
 * The client library against the real API served on a real port (typed calls, uploads, lipsync,
 * errors, the per-key rate limit and its retry). The turn stream, the live-session mint (capacity
 * queue, concurrency refusal) and 5xx retries are tested against a local HTTP server speaking
 * those operations' documented wire format, with a real mux stream written by AvatarMuxWriter: the
 * API's turn and mint routes are built elsewhere, and the API itself never answers a 5xx to order.
 */

interface Served {
  t: TestApi;
  server: ApiServer;
  base: string;
}

/** The API on a free port, with PUBLIC_BASE_URL its own address (so its signed media URLs point at it). */
async function serve(env: Record<string, string> = {}): Promise<Served> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const t = await testApi({ env: { PUBLIC_BASE_URL: base, LIPSYNC_PORTRAIT_LOOP_SECONDS: '2', ...env } });
  const server = await startApiServer(t.app.fetch, { port, hostname: '127.0.0.1' });
  return { t, server, base };
}

/** A fetch that counts the attempts it makes, by path. */
function countingFetch() {
  const attempts: string[] = [];
  const f: typeof fetch = (input, init) => {
    attempts.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
    return fetch(input, init);
  };
  return { fetch: f, attempts };
}

let api: Served;
beforeAll(async () => {
  api = await serve();
});
afterAll(async () => {
  await api.server.close({ timeoutMs: 1000 });
  await api.t.close();
  await closeTts();
});

describe('AvatarClient against the API', () => {
  it('makes typed calls: credits, avatars (create, get, list, update, delete), api keys, usage', async () => {
    const { apiKey } = await api.t.newTenant({ credits: 5 });
    const client = new AvatarClient({ apiKey, baseUrl: api.base });
    const balance = await client.credits.balance();
    expect(balance.availableCreditMicros).toBe(5 * MICROS_PER_SECOND);
    const created = await client.avatars.create({ displayName: 'Ada', sourceKind: 'image' });
    expect(created).toMatchObject({ displayName: 'Ada', status: 'draft' });
    expect((await client.avatars.get(created.id)).id).toBe(created.id);
    expect((await client.avatars.list()).data.map((a) => a.id)).toContain(created.id);
    expect((await client.avatars.update(created.id, { displayName: 'Ada L.' })).displayName).toBe('Ada L.');
    expect(await client.avatars.delete(created.id)).toBeUndefined();
    const key = await client.apiKeys.create({ name: 'reader', scopes: ['credits:read'] });
    expect(key.apiKey).toMatch(/^svc_/);
    const usage = await client.usage.sessions({ limit: 5 });
    expect(usage.data).toEqual([]);
    // The generic call is typed from the same document.
    expect((await client.request('getCreditBalance')).tenantId).toBe(balance.tenantId);
  });

  it('uploads files (multipart) from bytes and Blobs, and lists them', async () => {
    const { apiKey } = await api.t.newTenant();
    const client = new AvatarClient({ apiKey, baseUrl: api.base });
    const image = await client.assets.upload({ file: await png(16, 16), filename: 'p.png', kind: 'image' });
    expect(image).toMatchObject({ kind: 'image', status: 'ready', contentType: 'image/png' });
    const audio = await client.assets.upload({ file: new Blob([(await speechWav('Hi.')).wav]), filename: 'hi.wav' });
    expect(audio).toMatchObject({ kind: 'audio', contentType: 'audio/wav' });
    // The signed URL reads the bytes without the API key.
    const bytes = await fetch(image.publicUrl!);
    expect(bytes.status).toBe(200);
    expect(Buffer.from(await bytes.arrayBuffer()).equals(await png(16, 16))).toBe(true);
    expect((await client.assets.list()).data.map((a) => a.id).sort()).toEqual([image.id, audio.id].sort());
    const err = await client.assets.upload({ file: await png(8, 8), kind: 'audio' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 422, code: 'validation_error', field: 'kind', kind: 'http', retryable: false });
  });

  it('reads, pages and deletes assets; an asset in use is refused with what uses it', async () => {
    const { apiKey } = await api.t.newTenant();
    const client = new AvatarClient({ apiKey, baseUrl: api.base });
    const [a, b] = [
      await client.assets.upload({ file: await png(8, 8), filename: 'a.png' }),
      await client.assets.upload({ file: await png(9, 9), filename: 'b.png' }),
    ];
    expect(await client.assets.get(a.id)).toMatchObject({ id: a.id, status: 'ready', publicUrl: expect.any(String) });
    const first = await client.assets.list({ limit: 1, status: 'ready', kind: 'image' });
    expect(first.data.map((x) => x.id)).toEqual([b.id]);
    const second = await client.assets.list({ limit: 1, cursor: first.nextCursor! });
    expect(second).toMatchObject({ data: [{ id: a.id }], nextCursor: null });
    const avatar = await client.avatars.create({ displayName: 'Ada', sourceKind: 'image', sourceAssetId: a.id });
    const inUse = await client.assets.delete(a.id).catch((e: unknown) => e);
    expect(inUse).toMatchObject({
      status: 409,
      code: 'asset_in_use',
      retryable: false,
      body: { usedBy: { avatarIds: [avatar.id], clips: [] } },
    });
    expect(await client.assets.delete(b.id)).toBeUndefined();
    expect(await client.assets.get(b.id).catch((e: unknown) => e)).toMatchObject({ status: 404, code: 'not_found' });
  });

  it('renders a lipsync: the answer URL serves the MP4 without the key', { timeout: 120_000 }, async () => {
    const { apiKey } = await api.t.newTenant({ credits: 30 });
    const client = new AvatarClient({ apiKey, baseUrl: api.base });
    const portrait = await client.assets.upload({ file: fixtureBytes('grace_hopper'), filename: 'grace.jpg' });
    const audio = await client.assets.upload({
      file: (await speechWav('Nice to meet you.')).wav,
      filename: 'hello.wav',
    });
    const video = await client.lipsync({ audioUrl: audio.publicUrl!, portraitUrl: portrait.publicUrl! });
    expect(video).toMatchObject({ fps: 25, avatarId: expect.stringMatching(/^ava_/) });
    expect(video.durationSeconds).toBeCloseTo(video.frames / video.fps, 9);
    const mp4 = await fetch(video.url, { headers: { range: 'bytes=4-11' } });
    expect(mp4.status).toBe(206);
    expect(Buffer.from(await mp4.arrayBuffer()).toString('latin1')).toBe('ftypisom');
    expect((await client.credits.balance()).reservedCreditMicros).toBe(0);
  });

  it('throws one ApiError with status, code, requestId (body and X-Request-ID) and retryable', async () => {
    const { apiKey } = await api.t.newTenant();
    const client = new AvatarClient({ apiKey, baseUrl: api.base });
    const { fetch: counted, attempts } = countingFetch();
    const notFound = await new AvatarClient({ apiKey, baseUrl: api.base, fetch: counted }).avatars
      .get('ava_doesnotexist')
      .then(
        () => undefined,
        (e: unknown) => e as ApiError,
      );
    expect(notFound).toBeInstanceOf(ApiError);
    expect(notFound).toMatchObject({ status: 404, code: 'not_found', kind: 'http', retryable: false });
    expect(notFound?.requestId).toMatch(/^req_/);
    expect(attempts).toHaveLength(1); // a 404 is never retried
    const invalid = (await client.avatars.create({ displayName: '' } as never).catch((e: unknown) => e)) as ApiError;
    expect(invalid).toMatchObject({ status: 422, code: 'validation_error', field: 'displayName' });
    const unauthorized = (await new AvatarClient({ apiKey: `${apiKey}x`, baseUrl: api.base }).credits
      .balance()
      .catch((e: unknown) => e)) as ApiError;
    expect(unauthorized).toMatchObject({ status: 401, kind: 'http' });
    const reader = await client.apiKeys.create({ name: 'r', scopes: ['credits:read'] });
    const forbidden = (await new AvatarClient({ apiKey: reader.apiKey, baseUrl: api.base }).avatars
      .list()
      .catch((e: unknown) => e)) as ApiError;
    expect(forbidden).toMatchObject({ status: 403, code: 'forbidden' });
    expect(forbidden.body?.requiredScope).toBe('avatars:read');
    // 402: a lipsync the workspace cannot pay for.
    const poor = new AvatarClient({ apiKey: (await api.t.newTenant()).apiKey, baseUrl: api.base });
    const audio = await poor.assets.upload({ file: (await speechWav('Hello.')).wav, filename: 'a.wav' });
    const image = await poor.assets.upload({ file: fixtureBytes('grace_hopper'), filename: 'g.jpg' });
    const paywall = (await poor
      .lipsync({ audioUrl: audio.publicUrl!, portraitUrl: image.publicUrl! })
      .catch((e: unknown) => e)) as ApiError;
    expect(paywall).toMatchObject({ status: 402, code: 'insufficient_credits', retryable: false });
    expect(paywall.body?.billingUrl).toBe('/platform/billing');
  });
});

describe('the per-key rate limit (a 429 without code or queue fields)', () => {
  let limited: Served;
  beforeAll(async () => {
    limited = await serve({ RATE_LIMIT_POINTS: '2', RATE_LIMIT_WINDOW_SECONDS: '1' });
  });
  afterAll(async () => {
    await limited.server.close({ timeoutMs: 1000 });
    await limited.t.close();
  });

  it('is an ApiError of kind rate_limited with retryAfterMs when retries are off, and is retried after Retry-After otherwise', async () => {
    const { apiKey } = await limited.t.newTenant();
    const strict = new AvatarClient({ apiKey, baseUrl: limited.base, retry: { maxRetries: 0 } });
    // Two requests a second pass; a third within the same second cannot (a few calls make sure of it).
    let err: unknown;
    for (let i = 0; i < 6 && !err; i++)
      err = await strict.credits.balance().then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 429, kind: 'rate_limited', code: undefined, retryable: true });
    expect((err as ApiError).retryAfterMs).toBeGreaterThan(0);
    expect((err as ApiError).retryAfterMs).toBeLessThanOrEqual(1000);

    // The patient client waits out Retry-After: a call that met the limit answers after its second attempt.
    const statuses: number[][] = [];
    const patient = new AvatarClient({
      apiKey,
      baseUrl: limited.base,
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        statuses.at(-1)!.push(res.status);
        return res;
      },
    });
    for (let i = 0; i < 6 && !statuses.some((s) => s.length > 1); i++) {
      statuses.push([]);
      expect((await patient.credits.balance()).tenantId).toMatch(/^ten_/);
    }
    expect(statuses.find((s) => s.length > 1)).toEqual([429, 200]);
  });
});

// ---------------------------------------------------------------------------------------------
// Operations answered by a local server speaking their documented wire format
// ---------------------------------------------------------------------------------------------

interface Seen {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A local HTTP server whose answers the test scripts; it records every request. */
async function wireServer(handle: (req: Seen, res: http.ServerResponse, n: number) => void | Promise<void>) {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const s: Seen = { method: req.method!, path: req.url!, headers: req.headers, body };
      seen.push(s);
      void handle(s, res, seen.filter((x) => x.path === s.path).length);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    seen,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

const jsonAnswer = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': 'req_wire', ...headers });
  res.end(JSON.stringify(body));
};

/** A real turn stream: TTS speech in 40 ms chunks, one JPEG frame per chunk, speech events, end. */
async function turnStream(): Promise<{ chunks: Uint8Array[]; audioSamples: number; frames: number }> {
  const speech = await speechFromText('One, two, three.');
  const w = 64;
  const rgba = new Uint8Array(w * w * 4).fill(200);
  const jpeg = await encodeJpeg(rgba, w, w, { quality: 80 });
  const mux = new AvatarMuxWriter({
    tracks: [
      { kind: 'audio', sampleRate: speech.sampleRate },
      { kind: 'video', codec: 'jpeg', width: w, height: w, fps: 25 },
    ],
    metadata: { turn_id: 'trn_test' },
  });
  const chunks = [mux.start(), mux.event('speech_start')];
  const per = speech.sampleRate / 25;
  let frames = 0;
  for (let at = 0; at < speech.samples.length; at += per) {
    chunks.push(
      mux.video(jpeg, { frame: frames++ }),
      mux.audio(speech.samples.subarray(at, Math.min(speech.samples.length, at + per))),
    );
  }
  chunks.push(mux.event('speech_end'), mux.end());
  return { chunks, audioSamples: speech.samples.length, frames };
}

describe('turn(): the decoded stream', () => {
  it('yields the mux records as they arrive: header, audio, video, events, end', async () => {
    const stream = await turnStream();
    const wire = await wireServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-request-id': 'req_turn' });
      for (const c of stream.chunks) res.write(c);
      res.end();
    });
    try {
      const client = new AvatarClient({ apiKey: 'svc_x_y', baseUrl: wire.base });
      const turn = await client.realtime.turn(
        { avatar_id: 'ava_1', mode: 'repeat', text: 'One, two, three.' } as never,
        { idempotencyKey: 'turn-1' },
      );
      expect(turn.requestId).toBe('req_turn');
      const records: AvatarMuxRecord[] = [];
      for await (const r of turn) records.push(r);
      expect(records[0]).toMatchObject({ type: 'header', metadata: { turn_id: 'trn_test' } });
      expect(records.at(-1)).toMatchObject({ type: 'end', durationSamples: stream.audioSamples });
      expect(records.filter((r) => r.type === 'video')).toHaveLength(stream.frames);
      expect(
        records.filter((r) => r.type === 'audio').reduce((n, r) => n + (r.type === 'audio' ? r.sampleCount : 0), 0),
      ).toBe(stream.audioSamples);
      expect(records.filter((r) => r.type === 'event').map((r) => (r.type === 'event' ? r.name : ''))).toEqual([
        'speech_start',
        'speech_end',
      ]);
      expect(wire.seen[0]).toMatchObject({ method: 'POST', path: '/api/v1/realtime/turn' });
      expect(wire.seen[0]!.headers['idempotency-key']).toBe('turn-1');
      expect(JSON.parse(wire.seen[0]!.body)).toMatchObject({ avatar_id: 'ava_1' });
    } finally {
      await wire.close();
    }
  });

  it('cancel() stops the stream mid-way: iteration ends without an error and the download is dropped', async () => {
    const stream = await turnStream();
    let closed!: () => void;
    const connectionClosed = new Promise<void>((r) => (closed = r));
    const wire = await wireServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      // Half the stream, then nothing: a turn still being spoken.
      for (const c of stream.chunks.slice(0, 10)) res.write(c);
      res.on('close', () => closed());
    });
    try {
      const turn = await new AvatarClient({ apiKey: 'svc_x_y', baseUrl: wire.base }).realtime.turn({
        avatar_id: 'ava_1',
      } as never);
      const seen: string[] = [];
      for await (const r of turn) {
        seen.push(r.type);
        if (r.type === 'video') turn.cancel();
      }
      expect(seen[0]).toBe('header');
      expect(seen).not.toContain('end');
      await connectionClosed;
    } finally {
      await wire.close();
    }
  });

  it('retries a turn with an Idempotency-Key on a 503 before the stream, never once its bytes began', async () => {
    const stream = await turnStream();
    const wire = await wireServer((req, res, n) => {
      if (n === 1)
        return jsonAnswer(res, 503, { error: 'busy', status: 503, code: 'capacity_unavailable', retryable: true });
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      // Some records, then the connection breaks.
      for (const c of stream.chunks.slice(0, 5)) res.write(c);
      res.write(stream.chunks[5]!, () => res.socket?.destroy());
    });
    try {
      const client = new AvatarClient({ apiKey: 'svc_x_y', baseUrl: wire.base, retry: { baseDelayMs: 10 } });
      const turn = await client.realtime.turn({ avatar_id: 'ava_1' } as never, { idempotencyKey: 'k1' });
      const records: string[] = [];
      const err = await (async () => {
        for await (const r of turn) records.push(r.type);
      })().catch((e: unknown) => e);
      expect(err).toBeDefined();
      expect(records[0]).toBe('header');
      expect(wire.seen).toHaveLength(2); // the 503, then the stream; the broken stream is not repeated
      // Without a key, a POST turn is not retried at all.
      const once = await wireServer((_req, res) =>
        jsonAnswer(res, 503, { error: 'busy', status: 503, code: 'capacity_unavailable', retryable: true }),
      );
      try {
        const e = await new AvatarClient({ apiKey: 'svc_x_y', baseUrl: once.base, retry: { baseDelayMs: 10 } }).realtime
          .turn({ avatar_id: 'ava_1' } as never)
          .catch((x: unknown) => x);
        expect(e).toMatchObject({ status: 503, code: 'capacity_unavailable', retryable: true });
        expect(once.seen).toHaveLength(1);
      } finally {
        await once.close();
      }
    } finally {
      await wire.close();
    }
  });
});

describe('retries of 408 and 5xx', () => {
  it('retries idempotent calls with backoff up to maxRetries, and not a POST without an Idempotency-Key', async () => {
    const wire = await wireServer((req, res, n) => {
      if (req.method === 'GET' && n <= 2)
        return jsonAnswer(res, n === 1 ? 408 : 502, {
          error: 'flaky',
          status: n === 1 ? 408 : 502,
          code: n === 1 ? 'request_aborted' : 'upstream_unreachable',
          retryable: true,
        });
      if (req.method === 'GET') return jsonAnswer(res, 200, { data: [] });
      return jsonAnswer(res, 502, { error: 'render failed', status: 502, code: 'render_failed', retryable: true });
    });
    try {
      const client = new AvatarClient({ apiKey: 'svc_x_y', baseUrl: wire.base, retry: { baseDelayMs: 5 } });
      expect(await client.avatars.list()).toEqual({ data: [] });
      expect(wire.seen.map((s) => s.method)).toEqual(['GET', 'GET', 'GET']);
      const post = await client
        .lipsync({ audioUrl: 'https://example.com/a.wav', avatarId: 'ava_1' })
        .catch((e: unknown) => e);
      expect(post).toMatchObject({ status: 502, code: 'render_failed', kind: 'http' });
      expect(wire.seen.filter((s) => s.method === 'POST')).toHaveLength(1);
      // A 5xx that says it is not retryable is not retried either; maxRetries bounds the attempts.
      const always = await wireServer((_req, res) =>
        jsonAnswer(res, 500, { error: 'x', status: 500, code: 'internal_error', retryable: true }),
      );
      try {
        const e = await new AvatarClient({
          apiKey: 'svc_x_y',
          baseUrl: always.base,
          retry: { baseDelayMs: 5, maxRetries: 3 },
        }).credits
          .balance()
          .catch((x: unknown) => x);
        expect(e).toMatchObject({ status: 500, code: 'internal_error' });
        expect(always.seen).toHaveLength(4);
      } finally {
        await always.close();
      }
    } finally {
      await wire.close();
    }
  });
});

describe('live.mint: the capacity queue is a result, the concurrency limit an error', () => {
  const queued = (ticket: string, size: number) => ({
    error: 'Capacity is full',
    status: 429,
    retryable: true,
    queue_ticket_id: ticket,
    queue_size: size,
    recommended_retry_ms: 30,
  });
  const grant = {
    session_id: 'ses_1',
    room_name: 'avatar-ses_1',
    server_url: 'wss://lk',
    participant_token: 'tok',
    participant_identity: 'user-ses_1',
    expires_at: '2030-01-01T00:00:00Z',
  };

  it('mint answers { queued: true, ticket, queueSize, retryAfterMs } for a capacity 429, never retrying it itself', async () => {
    const wire = await wireServer((_req, res) => jsonAnswer(res, 429, queued('qtk_1', 3)));
    try {
      const r = await new AvatarClient({ apiKey: 'svc_x_y', baseUrl: wire.base }).live.mint({
        avatar_id: 'ava_1',
      } as never);
      expect(r).toEqual({ queued: true, ticket: 'qtk_1', queueSize: 3, retryAfterMs: 30, requestId: 'req_wire' });
      expect(wire.seen).toHaveLength(1);
    } finally {
      await wire.close();
    }
  });

  it('mintWithQueue waits the hint, mints again with the ticket, and returns the grant', async () => {
    const wire = await wireServer((req, res, n) =>
      n <= 2 ? jsonAnswer(res, 429, queued('qtk_7', 3 - n)) : jsonAnswer(res, 200, grant),
    );
    try {
      const positions: number[] = [];
      const session = await new AvatarClient({ apiKey: 'svc_x_y', baseUrl: wire.base }).live.mintWithQueue(
        { avatar_id: 'ava_1' } as never,
        { onQueued: (p) => positions.push(p.queueSize) },
      );
      expect(session).toEqual(grant);
      expect(positions).toEqual([2, 1]);
      const bodies = wire.seen.map((s) => JSON.parse(s.body) as Record<string, unknown>);
      expect(bodies[0]).toEqual({ avatar_id: 'ava_1' });
      expect(bodies[1]).toEqual({ avatar_id: 'ava_1', queue_ticket_id: 'qtk_7' });
      expect(bodies[2]).toEqual({ avatar_id: 'ava_1', queue_ticket_id: 'qtk_7' });
    } finally {
      await wire.close();
    }
  });

  it('aborting mintWithQueue while queued gives the ticket back (release)', async () => {
    const controller = new AbortController();
    const wire = await wireServer((req, res) => {
      if (req.path.endsWith('/release')) return jsonAnswer(res, 200, { released: true });
      jsonAnswer(res, 429, queued('qtk_9', 5));
    });
    try {
      const err = await new AvatarClient({ apiKey: 'svc_x_y', baseUrl: wire.base }).live
        .mintWithQueue({ avatar_id: 'ava_1' } as never, {
          signal: controller.signal,
          onQueued: () => controller.abort(new Error('user left')),
        })
        .catch((e: unknown) => e);
      expect((err as Error).message).toBe('user left');
      const release = wire.seen.find((s) => s.path === '/api/v1/realtime/livekit/session/release');
      expect(JSON.parse(release!.body)).toEqual({ queue_ticket_id: 'qtk_9' });
    } finally {
      await wire.close();
    }
  });

  it('the plan concurrency 429 is thrown as kind concurrency_limit with its counts, and not retried', async () => {
    const refusal = {
      error: 'Concurrent session limit reached',
      status: 429,
      code: 'concurrency_limit_reached',
      retryable: true,
      maxConcurrentSessions: 5,
      liveSessions: 4,
      activeSessions: 4,
      connectingSessions: 1,
      pendingSessions: 0,
      requestId: 'req_c',
    };
    const wire = await wireServer((_req, res) => jsonAnswer(res, 429, refusal, { 'retry-after': '1' }));
    try {
      const client = new AvatarClient({ apiKey: 'svc_x_y', baseUrl: wire.base });
      for (const call of [
        () => client.live.mint({ avatar_id: 'ava_1' } as never),
        () => client.live.mintWithQueue({ avatar_id: 'ava_1' } as never),
      ]) {
        const err = (await call().catch((e: unknown) => e)) as ApiError;
        expect(err).toBeInstanceOf(ApiError);
        expect(err).toMatchObject({
          status: 429,
          kind: 'concurrency_limit',
          code: 'concurrency_limit_reached',
          requestId: 'req_c',
        });
        expect(err.concurrency).toEqual({
          maxConcurrentSessions: 5,
          liveSessions: 4,
          activeSessions: 4,
          connectingSessions: 1,
          pendingSessions: 0,
        });
      }
      expect(wire.seen).toHaveLength(2);
    } finally {
      await wire.close();
    }
  });
});
