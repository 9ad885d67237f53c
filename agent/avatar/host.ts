/**
 * The avatar host of a worker process: every call's avatar runner, one renderer for all of them,
 * and the tick that drives them. Each tick (10 ms) asks every call for the frame its audio clock has
 * reached, renders those frames in one batch, and publishes each; a call only has a new frame every
 * 40 ms, so a tick carries about a quarter of the calls. Ticks never overlap: a slow batch delays the
 * next tick, and each call then takes the frame nearest its audio (see playout.ts).
 */
import type { VAD } from '@livekit/agents';
import type { Logger } from '../../core/log.ts';
import type { ObjectStorage } from '../../core/storage/index.ts';
import type { LipSyncEngine } from '../../render/lipsync/index.ts';
import type { CallRecordingSink, CallReporter, CallSpec } from './call.ts';
import { MediaCache } from './media.ts';
import { BatchRenderer } from './renderer.ts';
import { AvatarRunner, type DueFrame, type HostContext } from './runner.ts';

export const TICK_MS = 10;

export interface AvatarHostOptions {
  lipsync: LipSyncEngine;
  vad: VAD | null;
  storage: ObjectStorage;
  livekit: { url: string; apiKey: string; apiSecret: string };
  log: Logger;
  /** Local folder for downloaded clips and recordings in progress. */
  workDir: string;
  userJoinTimeoutMs?: number;
  heartbeatMs?: number;
  syncMarker?: boolean;
}

export interface TickStats {
  ticks: number;
  /** Ticks that started more than one tick period late. */
  lateTicks: number;
  maxTickMs: number;
}

export class AvatarHost {
  readonly renderer: BatchRenderer;
  readonly ctx: HostContext;
  readonly tickStats: TickStats = { ticks: 0, lateTicks: 0, maxTickMs: 0 };
  private readonly runners = new Set<AvatarRunner>();
  private loop: Promise<void> | null = null;
  private running = false;

  constructor(o: AvatarHostOptions) {
    this.renderer = new BatchRenderer(o.lipsync);
    this.ctx = {
      media: new MediaCache(o.storage, `${o.workDir}/media`, o.lipsync),
      vad: o.vad,
      storage: o.storage,
      livekit: o.livekit,
      log: o.log,
      workDir: `${o.workDir}/recordings`,
      fps: 25,
      sampleRate: 24_000,
      userJoinTimeoutMs: o.userJoinTimeoutMs ?? 120_000,
      heartbeatMs: o.heartbeatMs ?? 10_000,
      audioQueueMs: 100,
      ...(o.syncMarker ? { syncMarker: true } : {}),
    };
  }

  /** Calls in progress. */
  get calls(): AvatarRunner[] {
    return [...this.runners];
  }

  /** Starts a call's avatar (it joins its room); the returned runner's `ended` says when and why it is over. */
  async startCall(spec: CallSpec, reporter: CallReporter, recording: CallRecordingSink | null): Promise<AvatarRunner> {
    const runner = new AvatarRunner(this.ctx, spec, reporter, recording, (r) => this.runners.delete(r));
    this.runners.add(runner);
    this.ensureLoop();
    try {
      await runner.start();
    } catch (err) {
      await runner.end('failed');
      throw err;
    }
    return runner;
  }

  /** Ends every call with `reason` and stops the tick. */
  async close(reason: 'worker_shutdown' = 'worker_shutdown'): Promise<void> {
    await Promise.all([...this.runners].map((r) => r.end(reason)));
    this.running = false;
    await this.loop;
    this.loop = null;
  }

  private ensureLoop(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.tickLoop();
  }

  private async tickLoop(): Promise<void> {
    let next = performance.now();
    while (this.running) {
      const now = performance.now();
      if (now - next > TICK_MS) this.tickStats.lateTicks++;
      await this.tick(now);
      const took = performance.now() - now;
      this.tickStats.ticks++;
      this.tickStats.maxTickMs = Math.max(this.tickStats.maxTickMs, took);
      next += TICK_MS;
      // Behind by more than a few ticks (a stall): start again from now rather than race to catch up.
      if (performance.now() - next > 5 * TICK_MS) next = performance.now();
      const wait = next - performance.now();
      await new Promise<void>((r) => setTimeout(r, Math.max(0, wait)));
      if (this.runners.size === 0 && this.running) {
        // No call: idle until one starts (startCall restarts the loop).
        this.running = false;
      }
    }
  }

  private async tick(now: number): Promise<void> {
    const due: { runner: AvatarRunner; job: DueFrame }[] = [];
    for (const runner of this.runners) {
      try {
        const job = runner.due(now);
        if (job) due.push({ runner, job });
      } catch (err) {
        this.ctx.log.error({ err, sessionId: runner.spec.sessionId }, 'call could not prepare its frame');
        void runner.end('failed');
      }
    }
    if (due.length === 0) return;
    let frames: Uint8Array[];
    try {
      frames = await this.renderer.render(due.map((d) => d.job));
    } catch (err) {
      // One bad batch must not stop every call: retry them one by one, ending only the call that fails.
      this.ctx.log.warn({ err }, 'batch render failed, rendering calls one by one');
      frames = [];
      for (const d of due) {
        try {
          frames.push((await this.renderer.render([d.job]))[0]!);
        } catch (e) {
          this.ctx.log.error({ err: e, sessionId: d.runner.spec.sessionId }, 'call could not render its frame');
          frames.push(new Uint8Array(0));
          void d.runner.end('failed');
        }
      }
    }
    due.forEach((d, i) => {
      if (frames[i]!.length > 0) d.runner.show(d.job, frames[i]!);
    });
  }
}
