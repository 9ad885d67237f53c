import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApp } from '../api/app.ts';
import { startApiServer } from '../api/server.ts';
import { readAvatarMux } from '../client/index.ts';
import { loadConfig } from '../core/platform/config.ts';
import { MICROS_PER_SECOND } from '../core/credits/ledger.ts';
import { createLogger } from '../core/platform/log.ts';
import type { TurnSummary } from '../core/realtime/index.ts';
import { createServices } from '../core/wiring/services.ts';
import { encodeJpeg } from '../render/encode/index.ts';
import { openFrameCache } from '../render/framecache/index.ts';
import { closeTts } from '../render/tts/index.ts';
import { readyAvatar, testLoopDir } from '../test/realtime.ts';
import type { BenchModule, BenchReport } from './types.ts';

/**
 * Turns in `repeat` mode over a real HTTP server (the API app of createApp on api/server.ts, the
 * embedded TTS, the built-in renderer on a 512x512 idle loop, embedded PostgreSQL), one at a time
 * and 4 at once, beside a JPEG encode of one frame of the same loop measured in the same run.
 * Per turn, from just before the request is sent: the first bytes of the body (the stream's
 * header), the first audio record, the first video frame, and the end; the real-time factor is
 * the wall time of the whole stream over the seconds of audio it carries (below 1: faster than
 * real time). Target: first bytes under 300 ms. Server and client share this one process.
 * Flags: --rounds=5 (single turns; the concurrent phase runs rounds/2 batches, at least 2).
 */

const TEXT = 'Hello there! Thanks for stopping by today. How can I help you?';
const LOOP = { seconds: 4, size: 512 } as const;
const CONCURRENT = 4;
const TARGET_FIRST_BYTES_MS = 300;

interface TurnTiming {
  firstBytesMs: number;
  firstAudioMs: number;
  firstFrameMs: number;
  totalMs: number;
  audioSeconds: number;
  rtf: number;
  ended: string;
}

async function timedTurn(url: string, key: string, avatarId: string): Promise<TurnTiming> {
  const t0 = performance.now();
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ avatar_id: avatarId, mode: 'repeat', text: TEXT }),
  });
  if (res.status !== 200 || !res.body) throw new Error(`turn answered ${res.status}: ${await res.text()}`);
  const reader = res.body.getReader();
  let firstBytesMs = Number.NaN;
  // The body's chunks, timed as they arrive, then decoded by the client reader.
  const timed = (async function* () {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      if (Number.isNaN(firstBytesMs)) firstBytesMs = performance.now() - t0;
      yield value;
    }
  })();
  let firstAudioMs = Number.NaN;
  let firstFrameMs = Number.NaN;
  let audioSeconds = 0;
  let ended = 'none';
  for await (const r of readAvatarMux(timed)) {
    const at = performance.now() - t0;
    if (r.type === 'audio') {
      if (Number.isNaN(firstAudioMs)) firstAudioMs = at;
      audioSeconds += r.duration;
    }
    if (r.type === 'video' && Number.isNaN(firstFrameMs)) firstFrameMs = at;
    if (r.type === 'end' || r.type === 'error') ended = r.type;
  }
  const totalMs = performance.now() - t0;
  return { firstBytesMs, firstAudioMs, firstFrameMs, totalMs, audioSeconds, rtf: totalMs / 1000 / audioSeconds, ended };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const max = (xs: number[]) => Math.max(...xs);

function summarize(ts: TurnTiming[]) {
  const pick = (k: keyof Omit<TurnTiming, 'ended'>) => ({
    median: median(ts.map((t) => t[k])),
    max: max(ts.map((t) => t[k])),
  });
  return {
    turns: ts.length,
    firstBytesMs: pick('firstBytesMs'),
    firstAudioMs: pick('firstAudioMs'),
    firstFrameMs: pick('firstFrameMs'),
    totalMs: pick('totalMs'),
    audioSeconds: pick('audioSeconds'),
    rtf: pick('rtf'),
  };
}

async function jpegMs(): Promise<number> {
  const cache = await openFrameCache(await testLoopDir(LOOP));
  const rgba = await cache.frame(0);
  const { width, height } = cache.manifest;
  for (let i = 0; i < 5; i++) await encodeJpeg(rgba, width, height, { quality: 80 });
  const n = 40;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await encodeJpeg(rgba, width, height, { quality: 80 });
  return (performance.now() - t0) / n;
}

export const turn: BenchModule = {
  name: 'turn',
  description:
    'repeat turns over HTTP: time to first mux bytes, first audio and frame, real-time factor, single and 4 at once, beside a JPEG encode',
  async run({ flags }): Promise<BenchReport> {
    const rounds = Math.max(1, Number(flags.rounds ?? 5));
    const dir = mkdtempSync(path.join(os.tmpdir(), 'avatar-bench-turn-'));
    const config = loadConfig({
      ...process.env,
      DATA_DIR: dir,
      DATABASE_URL: '',
      REDIS_URL: '',
      LOG_LEVEL: 'warn',
      NODE_ENV: 'production',
      RATE_LIMIT_POINTS: '100000',
      JOB_WORKERS: '0',
    });
    const services = await createServices(config, { log: createLogger('warn') });
    const server = await startApiServer(createApp(services).fetch, { port: 0, hostname: '127.0.0.1' });
    const failures: string[] = [];
    try {
      const tenant = await services.tenants.create('bench turns');
      await services.ledger.grant(tenant.id, 100_000 * MICROS_PER_SECOND);
      const { apiKey } = await services.keys.create({
        tenantId: tenant.id,
        name: 'bench',
        scopes: ['*'],
        spendLimitCreditMicros: null,
      });
      const { avatarId } = await readyAvatar({ services }, tenant.id, { loop: LOOP });
      const url = `http://127.0.0.1:${server.port}/api/v1/realtime/turn`;
      // The server's own view of each turn: from the start of its handler to the header and the first frame queued.
      const serverSide: TurnSummary[] = [];
      services.turns.events.on('ended', (t) => serverSide.push(t));

      const prepare = await fetch(`http://127.0.0.1:${server.port}/api/v1/realtime/prepare`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ avatar_id: avatarId }),
      });
      const prepared = (await prepare.json()) as { timings: Record<string, number> };
      if (prepare.status !== 200) failures.push(`prepare answered ${prepare.status}`);
      await timedTurn(url, apiKey, avatarId); // warm-up: first use of every code path

      const jpeg: number[] = [];
      const single: TurnTiming[] = [];
      const concurrent: TurnTiming[] = [];
      // Interleaved: single turns, a batch at once, the JPEG reference, round by round, so noise hits all three.
      const serverSingle: TurnSummary[] = [];
      const serverConcurrent: TurnSummary[] = [];
      for (let r = 0; r < rounds; r++) {
        serverSide.length = 0;
        single.push(await timedTurn(url, apiKey, avatarId));
        serverSingle.push(...serverSide.splice(0));
        if (r % 2 === 0 || rounds === 1) {
          concurrent.push(
            ...(await Promise.all(Array.from({ length: CONCURRENT }, () => timedTurn(url, apiKey, avatarId)))),
          );
          serverConcurrent.push(...serverSide.splice(0));
        }
        jpeg.push(await jpegMs());
      }
      for (const t of [...single, ...concurrent]) if (t.ended !== 'end') failures.push(`a turn ended with ${t.ended}`);
      const jpegMedian = median(jpeg);
      const s = summarize(single);
      const c = summarize(concurrent);
      const f = (x: number) => x.toFixed(1);
      const row = (name: string, x: ReturnType<typeof summarize>) =>
        `  ${name}: first bytes ${f(x.firstBytesMs.median)} ms (max ${f(x.firstBytesMs.max)}, x${f(x.firstBytesMs.median / jpegMedian)} JPEG), ` +
        `first audio ${f(x.firstAudioMs.median)} ms, first frame ${f(x.firstFrameMs.median)} ms (max ${f(x.firstFrameMs.max)}, x${f(x.firstFrameMs.median / jpegMedian)} JPEG), ` +
        `whole turn ${f(x.totalMs.median)} ms for ${x.audioSeconds.median.toFixed(2)} s of audio: real-time factor ${x.rtf.median.toFixed(3)} (max ${x.rtf.max.toFixed(3)})`;
      const serverRow = (name: string, ts: TurnSummary[]) => {
        const at = (k: 'bytesMs' | 'frameMs') => ts.map((t) => t.first[k] ?? Number.NaN);
        return `${name}: header queued ${f(median(at('bytesMs')))} ms (max ${f(max(at('bytesMs')))}), first frame queued ${f(median(at('frameMs')))} ms (max ${f(max(at('frameMs')))}) after the handler started`;
      };
      const lines = [
        `repeat turn "${TEXT}" on a ${LOOP.size}x${LOOP.size} ${LOOP.seconds} s idle loop, voice slt, over HTTP on 127.0.0.1; ${os.cpus().length} CPUs, load ${os.loadavg()[0]!.toFixed(2)}`,
        `JPEG encode of one ${LOOP.size}x${LOOP.size} loop frame (sharp, q80), same run: ${f(jpegMedian)} ms (median of ${jpeg.length})`,
        `prepare: ${Object.entries(prepared.timings ?? {})
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
        row(`1 turn at a time (${single.length} turns)`, s),
        serverRow('    server side', serverSingle),
        row(`${CONCURRENT} turns at once (${concurrent.length} turns)`, c),
        serverRow('    server side', serverConcurrent),
        `  target: first bytes under ${TARGET_FIRST_BYTES_MS} ms after the request: ${s.firstBytesMs.max < TARGET_FIRST_BYTES_MS ? 'met' : 'missed'} single, ${c.firstBytesMs.max < TARGET_FIRST_BYTES_MS ? 'met' : 'missed'} at ${CONCURRENT} at once (worst turn)`,
      ];
      return {
        results: { jpegMs: jpegMedian, prepare: prepared.timings, single: s, concurrent: c, text: TEXT, loop: LOOP },
        table: lines.join('\n'),
        failures,
      };
    } finally {
      await server.close({ timeoutMs: 2000 });
      await services.close();
      await closeTts();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
