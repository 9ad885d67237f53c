import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApp } from '../api/app.ts';
import { startApiServer } from '../api/server.ts';
import { loadConfig } from '../core/platform/config.ts';
import { MICROS_PER_SECOND } from '../core/credits/ledger.ts';
import { startEmbeddedPostgres } from '../core/platform/db/embedded.ts';
import { newId } from '../core/platform/ids.ts';
import { createLogger } from '../core/platform/log.ts';
import { createServices, type Services } from '../core/wiring/services.ts';
import { LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET, startLiveKit, startRedis } from '../test/deps.ts';
import { quantile } from './lib/load.ts';
import type { BenchModule, BenchOptions, BenchReport } from './types.ts';

/**
 * Live-call mint latency (target: p50 under 20 ms of our own time), against a real local LiveKit
 * server, over HTTP, one mint at a time (each followed by its release, not measured). Each mint's
 * time is split with its Server-Timing header: our own work (checks, tenant lock, capacity slot,
 * credit reservation, rows, token) and LiveKit's room creation and agent dispatch; the client's
 * total is measured too. Two variants side by side, interleaved in rounds: capacity coordination
 * in-process and on Redis. Flags: --mints=200 (per variant), --rounds=4, --warmup=20.
 */
const TARGET_OWN_P50_MS = 20;

type Variant = 'memory' | 'redis';

interface Sample {
  totalMs: number;
  ownMs: number;
  roomMs: number;
  dispatchMs: number;
}

function serverTiming(header: string | null): { own: number; room: number; dispatch: number } | undefined {
  if (!header) return undefined;
  const dur = (name: string) => Number(new RegExp(`(?:^|, )${name};dur=([\\d.]+)`).exec(header)?.[1]);
  const out = { own: dur('own'), room: dur('livekit-room'), dispatch: dur('livekit-dispatch') };
  return Object.values(out).every(Number.isFinite) ? out : undefined;
}

const sorted = (xs: number[]) => Float64Array.from(xs).sort();
const ms = (x: number) => x.toFixed(2);

interface Target {
  variant: Variant;
  services: Services;
  base: string;
  apiKey: string;
  avatarId: string;
  stop(): Promise<void>;
}

async function startTarget(variant: Variant, env: Record<string, string>): Promise<Target> {
  const config = loadConfig({ ...env, ...(variant === 'redis' ? {} : { REDIS_URL: '' }) });
  const services = await createServices(config, { log: createLogger('warn'), listen: true });
  const server = await startApiServer(createApp(services).fetch, { port: 0, hostname: '127.0.0.1' });
  const tenant = await services.tenants.create(`mint bench ${variant}`);
  await services.ledger.grant(tenant.id, 1_000_000 * MICROS_PER_SECOND);
  const { apiKey } = await services.keys.create({ tenantId: tenant.id, name: 'bench', scopes: ['*'] });
  const avatarId = newId('avatar');
  await services.sql`
    insert into avatars (id, tenant_id, display_name, status, idle_video_status, serving_loop_key, serving_cache_key, cache_version)
    values (${avatarId}, ${tenant.id}, 'Bench', 'ready', 'ready', 'bench/loop.mp4', 'bench/loop', 1)`;
  await services.capacity.setPoolSlots('primary', 1000);
  return {
    variant,
    services,
    base: `http://127.0.0.1:${server.port}`,
    apiKey,
    avatarId,
    stop: async () => {
      await server.close({ timeoutMs: 1000 });
      await services.close();
    },
  };
}

async function mintOnce(t: Target, failures: string[]): Promise<Sample | undefined> {
  const headers = { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json' };
  const t0 = performance.now();
  const res = await fetch(`${t.base}/api/v1/realtime/livekit/session`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ avatar_id: t.avatarId, max_duration_seconds: 60 }),
  });
  const body = (await res.json()) as { session_id?: string };
  const totalMs = performance.now() - t0;
  if (res.status !== 200 || !body.session_id) {
    failures.push(`${t.variant}: mint answered ${res.status}: ${JSON.stringify(body).slice(0, 200)}`);
    return undefined;
  }
  const timing = serverTiming(res.headers.get('server-timing'));
  const rel = await fetch(`${t.base}/api/v1/realtime/livekit/session/release`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ session_id: body.session_id }),
  });
  await rel.arrayBuffer();
  if (rel.status !== 200) failures.push(`${t.variant}: release answered ${rel.status}`);
  if (!timing) {
    failures.push(`${t.variant}: no Server-Timing on the grant`);
    return undefined;
  }
  return { totalMs, ownMs: timing.own, roomMs: timing.room, dispatchMs: timing.dispatch };
}

export const mint: BenchModule = {
  name: 'mint',
  description:
    'POST /realtime/livekit/session on a real LiveKit server: our own time vs room creation and dispatch (in-process vs Redis coordination)',
  async run({ flags }: BenchOptions): Promise<BenchReport> {
    const mints = Number(flags.mints ?? 200);
    const rounds = Math.max(1, Number(flags.rounds ?? 4));
    const warmup = Number(flags.warmup ?? 20);
    const failures: string[] = [];
    const dir = mkdtempSync(path.join(os.tmpdir(), 'avatar-bench-mint-'));
    const cleanups: (() => Promise<unknown>)[] = [async () => rmSync(dir, { recursive: true, force: true })];
    try {
      const [pg, redis, livekit] = await Promise.all([startEmbeddedPostgres({ dir }), startRedis(), startLiveKit()]);
      cleanups.push(
        () => pg.stop(),
        () => redis.stop(),
        () => livekit.stop(),
      );
      const env = {
        DATABASE_URL: pg.url,
        REDIS_URL: redis.url,
        DATA_DIR: dir,
        NODE_ENV: 'production',
        LOG_LEVEL: 'warn',
        LIVEKIT_URL: livekit.url,
        LIVEKIT_API_KEY: LIVEKIT_DEV_KEY,
        LIVEKIT_API_SECRET: LIVEKIT_DEV_SECRET,
        // The per-key throttle still runs on every request; it must not refuse the benchmark's own.
        RATE_LIMIT_POINTS: '1000000000',
      };
      const targets: Target[] = [];
      for (const v of ['memory', 'redis'] as Variant[]) {
        const target = await startTarget(v, env);
        cleanups.push(() => target.stop());
        targets.push(target);
      }
      for (const target of targets) for (let i = 0; i < warmup; i++) await mintOnce(target, failures);

      const samples: Record<Variant, Sample[]> = { memory: [], redis: [] };
      const perRound = Math.ceil(mints / rounds);
      for (let r = 0; r < rounds; r++) {
        // Interleaved: machine noise hits both variants alike.
        const order = r % 2 ? [...targets].reverse() : targets;
        for (const target of order) {
          for (let i = 0; i < perRound; i++) {
            const s = await mintOnce(target, failures);
            if (s) samples[target.variant].push(s);
          }
        }
      }

      const results: Record<string, unknown> = { targetOwnP50Ms: TARGET_OWN_P50_MS };
      const lines = [
        `${'variant'.padEnd(8)} ${'n'.padStart(5)}  ${'own p50'.padStart(8)} ${'own p99'.padStart(8)}  ${'room p50'.padStart(8)} ${'room p99'.padStart(8)}  ${'disp p50'.padStart(8)} ${'disp p99'.padStart(8)}  ${'total p50'.padStart(9)} ${'total p99'.padStart(9)}`,
      ];
      for (const v of ['memory', 'redis'] as Variant[]) {
        const xs = samples[v];
        const q = (pick: (s: Sample) => number, p: number) => quantile(sorted(xs.map(pick)), p);
        const row = {
          n: xs.length,
          ownP50Ms: q((s) => s.ownMs, 0.5),
          ownP99Ms: q((s) => s.ownMs, 0.99),
          roomP50Ms: q((s) => s.roomMs, 0.5),
          roomP99Ms: q((s) => s.roomMs, 0.99),
          dispatchP50Ms: q((s) => s.dispatchMs, 0.5),
          dispatchP99Ms: q((s) => s.dispatchMs, 0.99),
          totalP50Ms: q((s) => s.totalMs, 0.5),
          totalP99Ms: q((s) => s.totalMs, 0.99),
        };
        results[v] = Object.fromEntries(Object.entries(row).map(([k, x]) => [k, k === 'n' ? x : Number(x.toFixed(3))]));
        lines.push(
          `${v.padEnd(8)} ${String(row.n).padStart(5)}  ${ms(row.ownP50Ms).padStart(8)} ${ms(row.ownP99Ms).padStart(8)}  ${ms(row.roomP50Ms).padStart(8)} ${ms(row.roomP99Ms).padStart(8)}  ${ms(row.dispatchP50Ms).padStart(8)} ${ms(row.dispatchP99Ms).padStart(8)}  ${ms(row.totalP50Ms).padStart(9)} ${ms(row.totalP99Ms).padStart(9)}`,
        );
      }
      lines.push(
        '',
        `milliseconds; target: own p50 < ${TARGET_OWN_P50_MS} ms (own = the mint's work without LiveKit's room creation and dispatch)`,
      );
      return { results, table: lines.join('\n'), failures: [...new Set(failures)] };
    } finally {
      for (const c of cleanups.reverse()) await c().catch(() => {});
    }
  },
};
