/**
 * The avatar host of a worker process: every call's avatar runner, one renderer for all of them,
 * and the tick that drives them. Each tick (every 10 ms, or sooner when a call's next frame falls due)
 * publishes, for every call, the frame its audio clock has reached, if it is drawn; and, unless a batch is still drawing, starts one batch with each
 * call's next frame (one ahead of playout). Drawing and showing are decoupled: a slow batch delays
 * nothing but the frames it draws, and a frame not drawn in time is skipped, never shown late
 * (see playout.ts for how the due frame is chosen).
 */
import { inProcessFrameDecoder, type FrameDecoder } from '../../render/framecache/index.ts';
import type { VAD } from '@livekit/agents';
import type { Logger } from '../../core/platform/log.ts';
import type { ObjectStorage } from '../../core/platform/storage/index.ts';
import type { LipSyncEngine } from '../../render/lipsync/index.ts';
import { AudioVisemeStream, type AudioVisemeThread } from '../../render/visemes/index.ts';
import type { CallRecordingSink, CallReporter, CallSpec } from './call.ts';
import { DecodedFrames, MediaCache } from './media.ts';
import { BatchRenderer } from './renderer.ts';
import type { VideoCodecName } from './avatar-room.ts';
import type { DueFrame } from './frames.ts';
import { AvatarRunner, type CallObserver, type HostContext } from './runner.ts';
import { TICK_MS, nextTick } from './tick.ts';

const STATS_EVERY_MS = 10_000;

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
  observer?: CallObserver;
  /** Memory for decoded frames, all calls together (default 2 GiB). */
  frameMemoryBytes?: number;
  /** Decodes stored frames (default: on the event loop; a worker gives it a thread of its own). */
  frameDecoder?: FrameDecoder;
  /**
   * rtc-node's audio queue per call, ms, a multiple of 10 (default 100): the longest stall a call's
   * audio rides out (a reply sent faster than real time starts in place of the queued silence). It plus
   * the 30 ms video hold is how far ahead of a shown frame its audio is in the sink; a frame is drawn
   * ahead only once its audio is there.
   */
  audioQueueMs?: number;
  /** Speech a segment holds before it starts playing, ms (default 100): the slack for a sender that streams in real time. */
  speechStartMs?: number;
  /** The published video's codec (default H.264: about half the encode CPU of VP8). */
  videoCodec?: VideoCodecName;
  /**
   * Where speech is analysed for the mouth (default: AudioVisemeStream in this thread). The worker
   * passes an AudioVisemeThread's streams: the viseme model's runs block the thread they run on.
   */
  mouthAnalysis?: Pick<AudioVisemeThread, 'open'>;
}

export interface TickStats {
  ticks: number;
  /** Frames published, all calls together. */
  shown: number;
  /** Frames that fell due but were not drawn in time, all calls together: skipped, never shown late. */
  skipped: number;
  /** Ticks that started more than one tick period late. */
  lateTicks: number;
  maxTickMs: number;
  /** Milliseconds of calls publishing, summed over calls (two calls for a second: 2000): what a per-call rate divides by. */
  callMs: number;
}

export class AvatarHost {
  readonly renderer: BatchRenderer;
  readonly ctx: HostContext;
  readonly tickStats: TickStats = { ticks: 0, shown: 0, skipped: 0, lateTicks: 0, maxTickMs: 0, callMs: 0 };
  /** Told, each tick while a call publishes, how late the tick ran past its time, ms (the worker's metrics). */
  onTickLag?: (lagMs: number) => void;
  private readonly runners = new Set<AvatarRunner>();
  private loop: Promise<void> | null = null;
  private running = false;
  private statsTimer: NodeJS.Timeout | null = null;
  private batch: Promise<void> | null = null;

  constructor(o: AvatarHostOptions) {
    this.renderer = new BatchRenderer(o.lipsync);
    this.ctx = {
      media: new MediaCache(
        o.storage,
        `${o.workDir}/media`,
        o.lipsync,
        new DecodedFrames(o.frameMemoryBytes ?? 2048 * 2 ** 20),
        o.frameDecoder ?? inProcessFrameDecoder,
      ),
      vad: o.vad,
      storage: o.storage,
      livekit: o.livekit,
      log: o.log,
      workDir: `${o.workDir}/recordings`,
      fps: 25,
      sampleRate: 24_000,
      userJoinTimeoutMs: o.userJoinTimeoutMs ?? 120_000,
      heartbeatMs: o.heartbeatMs ?? 10_000,
      audioQueueMs: o.audioQueueMs ?? 100,
      speechStartMs: o.speechStartMs ?? 100,
      videoCodec: o.videoCodec ?? 'h264',
      mouthStream: (sampleRate, fps) =>
        o.mouthAnalysis ? o.mouthAnalysis.open({ sampleRate, fps }) : new AudioVisemeStream({ sampleRate, fps }),
      neural: o.lipsync.needsAudio,
      // Audio reaches a viewer about 30 ms after a frame captured with it (measured at an rtc-node
      // viewer by host.realtime.test.ts: the Opus frame and the receiver's jitter buffer).
      videoDelayMs: 30,
      ...(o.syncMarker ? { syncMarker: true } : {}),
      ...(o.observer ? { observer: o.observer } : {}),
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
    this.statsTimer ??= setInterval(() => this.logStats(), STATS_EVERY_MS);
    this.statsTimer.unref();
  }

  private lastStats = {
    ticks: 0,
    shown: 0,
    lateTicks: 0,
    callMs: 0,
    frames: 0,
    drawn: 0,
    batches: 0,
    batchMs: 0,
    at: performance.now(),
  };

  /** What the renderer did since the last report: the figures an operator sizes a worker by. */
  private logStats(): void {
    const r = this.renderer.stats;
    const now = performance.now();
    const last = this.lastStats;
    const seconds = (now - last.at) / 1000;
    const frames = r.frames - last.frames;
    this.ctx.log.info(
      {
        calls: this.runners.size,
        /**
         * Frames published per second, per call: over the time each call was publishing, not the
         * whole interval (a call that started or ended within it, or the first interval after the
         * worker idled, would read low).
         */
        fpsPerCall:
          this.tickStats.callMs > last.callMs
            ? Math.round(((this.tickStats.shown - last.shown) / (this.tickStats.callMs - last.callMs)) * 10_000) / 10
            : 0,
        renderedPerSecond: Math.round((frames / seconds) * 10) / 10,
        drawnPerSecond: Math.round(((r.drawn - last.drawn) / seconds) * 10) / 10,
        batchMsPerFrame: frames > 0 ? Math.round(((r.batchMs - last.batchMs) / frames) * 100) / 100 : 0,
        /** Frames per batch: the calls whose frames were drawn together. */
        framesPerBatch: r.ticks > last.batches ? Math.round((frames / (r.ticks - last.batches)) * 10) / 10 : 0,
        lateTicks: this.tickStats.lateTicks - last.lateTicks,
        maxTickMs: Math.round(this.tickStats.maxTickMs),
      },
      'render stats',
    );
    this.lastStats = {
      ticks: this.tickStats.ticks,
      shown: this.tickStats.shown,
      lateTicks: this.tickStats.lateTicks,
      callMs: this.tickStats.callMs,
      frames: r.frames,
      drawn: r.drawn,
      batches: r.ticks,
      batchMs: r.batchMs,
      at: now,
    };
    this.tickStats.maxTickMs = 0;
    if (this.runners.size === 0 && !this.running && this.statsTimer) {
      clearInterval(this.statsTimer);
      this.statsTimer = null;
    }
  }

  private async tickLoop(): Promise<void> {
    let next = performance.now();
    let prev = next;
    while (this.running) {
      const now = performance.now();
      if (now - next > TICK_MS) this.tickStats.lateTicks++;
      let publishing = false;
      for (const runner of this.runners)
        if (runner.publishing) {
          this.tickStats.callMs += now - prev;
          publishing = true;
        }
      if (publishing) this.onTickLag?.(Math.max(0, now - next));
      prev = now;
      this.tick(now);
      const took = performance.now() - now;
      this.tickStats.ticks++;
      this.tickStats.maxTickMs = Math.max(this.tickStats.maxTickMs, took);
      next = nextTick(next, performance.now());
      // Wake when the next frame of any call is due, if that comes before the next tick: a frame
      // shown as soon as it is due keeps the intervals viewers see even (not rounded to ticks).
      const after = performance.now();
      let wake = next;
      for (const runner of this.runners) wake = Math.min(wake, after + runner.msUntilNextFrame(after));
      await new Promise<void>((r) => setTimeout(r, Math.max(0, wake - performance.now())));
      if (this.runners.size === 0 && this.running) {
        // No call: idle until one starts (startCall restarts the loop).
        this.running = false;
      }
    }
    await this.batch;
  }

  /** Shows what is due, and starts drawing the next frames (one batch at a time, not awaited). */
  private tick(now: number): void {
    for (const runner of this.runners) this.count(runner.showDue(now));
    if (this.batch) return;
    const due: { runner: AvatarRunner; job: DueFrame }[] = [];
    for (const runner of this.runners) {
      try {
        const job = runner.nextToRender(now);
        if (job) due.push({ runner, job });
      } catch (err) {
        this.ctx.log.error({ err, sessionId: runner.spec.sessionId }, 'call could not prepare its frame');
        void runner.end('failed');
      }
    }
    if (due.length === 0) return;
    this.batch = this.draw(due).finally(() => (this.batch = null));
  }

  private async draw(due: { runner: AvatarRunner; job: DueFrame }[]): Promise<void> {
    let frames: Uint8Array[];
    try {
      frames = await this.renderer.render(due.map((d) => d.job));
    } catch (err) {
      // One bad batch must not stop every call: draw the calls one by one, ending only the call that fails.
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
      if (frames[i]!.length > 0) d.runner.rendered(d.job, frames[i]!);
    });
    // A batch that finished between ticks: show what became due meanwhile without waiting for the next tick.
    const now = performance.now();
    for (const d of due) this.count(d.runner.showDue(now));
  }

  private count(shown: { skipped: number } | null): void {
    if (!shown) return;
    this.tickStats.shown++;
    this.tickStats.skipped += shown.skipped;
  }
}
