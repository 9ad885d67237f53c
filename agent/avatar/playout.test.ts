import { describe, expect, it } from 'vitest';
import { frameAudioSpan } from '../../render/lipsync/index.ts';
import type { MouthFrame } from '../../render/visemes/index.ts';
import { SpeechPlayout, type AudioSink, type MouthStream, type PlayoutEvent } from './playout.ts';

const SR = 24_000;
const FPS = 25;
const SPF = SR / FPS;

/**
 * A simulated audio device in virtual time, shaped like rtc-node's native AudioSource (webrtc-sys
 * AudioTrackSource): a device clock drains the queue 10 ms at a time (its rate off by `ppm`); a
 * capture goes into the queue at once (it holds up to twice `queueMs`) and resolves once the queue
 * is down to `queueMs`; a clear drops everything queued, the chunk of a capture still waiting
 * included. It plays silence of its own when starved, as a real one does.
 */
class SimDevice implements AudioSink {
  readonly sampleRate = SR;
  readonly queueSamples: number;
  queued = 0;
  /** Samples of our stream played so far, and pushed so far (played + queued). */
  played = 0;
  pushed = 0;
  /** Loudness of what was pushed, per 10 ms of our stream: 1 where the audio is speech. */
  loud = new Uint8Array((SR * 60 * 11) / (SR / 100));
  private pending: { pcm: Int16Array; resolve: () => void }[] = [];
  /** A capture whose chunk is queued, waiting for the queue to drain to `queueSamples`. */
  private waiting: (() => void) | null = null;
  /** Acceptances not yet told to the caller (a busy event loop hears of them late). */
  private told: { at: number; resolve: () => void }[] = [];
  nextDrain: number;
  private readonly drainEvery: number;
  /** Seeded: how late each acceptance reaches the caller, up to `lateMs`. */
  private seed = 11;

  constructor(
    private readonly clock: { t: number },
    queueMs: number,
    ppm: number,
    private readonly lateMs = 0,
  ) {
    this.queueSamples = (SR * queueMs) / 1000;
    this.drainEvery = 10 / (1 + ppm / 1e6);
    this.nextDrain = clock.t + this.drainEvery;
  }

  capture(pcm: Int16Array): Promise<void> {
    return new Promise((resolve) => {
      this.pending.push({ pcm, resolve });
      this.admit();
    });
  }

  clear(): void {
    // What was queued is dropped, a waiting capture's chunk too.
    this.pushed = this.played;
    this.queued = 0;
    // A waiting capture returns (told at once: nothing else would tell it once the clock stops).
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.();
    for (const l of this.told.splice(0)) l.resolve();
    this.admit();
  }

  private admit(): void {
    while (
      !this.waiting &&
      this.pending.length > 0 &&
      this.queued + this.pending[0]!.pcm.length <= 2 * this.queueSamples
    ) {
      const { pcm, resolve } = this.pending.shift()!;
      for (let i = 0; i < pcm.length; i += SR / 100) {
        let sum = 0;
        for (let k = i; k < Math.min(pcm.length, i + SR / 100); k++) sum += Math.abs(pcm[k]!);
        this.loud[Math.floor((this.pushed + i) / (SR / 100))] = sum / (SR / 100) > 1000 ? 1 : 0;
      }
      this.queued += pcm.length;
      this.pushed += pcm.length;
      if (this.queued <= this.queueSamples) this.accept(resolve);
      else this.waiting = resolve;
    }
  }

  private accept(resolve: () => void): void {
    if (this.lateMs === 0) resolve();
    else {
      this.seed = (this.seed * 1103515245 + 12345) & 0x7fffffff;
      this.told.push({ at: this.clock.t + (this.seed / 0x7fffffff) * this.lateMs, resolve });
    }
  }

  /** The next moment something happens: a drain, or an acceptance reaching the caller. */
  get nextEvent(): number {
    return Math.min(this.nextDrain, ...this.told.map((l) => l.at));
  }

  /** Advances the device to the clock's time: 10 ms frames leave the queue. */
  step(): void {
    while (this.clock.t >= this.nextDrain) {
      const take = Math.min(this.queued, SR / 100);
      this.queued -= take;
      this.played += take;
      this.nextDrain += this.drainEvery;
      if (this.waiting && this.queued <= this.queueSamples) {
        const resolve = this.waiting;
        this.waiting = null;
        this.accept(resolve);
      }
      this.admit();
    }
    const due = this.told.filter((l) => l.at <= this.clock.t);
    this.told = this.told.filter((l) => l.at > this.clock.t);
    for (const l of due) l.resolve();
  }

  /**
   * After a clear, the caller numbers what it pushes next from `from` (SpeechPlayout's onDropped):
   * the device numbers our stream the same way, so positions compare.
   */
  renumber(from: number): void {
    this.played = this.pushed = from;
  }

  /** Exact playout position of our stream now (samples), interpolated within the current 10 ms frame. */
  truePosition(): number {
    const into = 1 - (this.nextDrain - this.clock.t) / this.drainEvery;
    return this.played + (this.queued > 0 ? Math.max(0, Math.min(1, into)) * (SR / 100) : 0);
  }

  heardAt(position: number): boolean {
    return this.loud[Math.floor(position / (SR / 100))] === 1;
  }
}

const flush = async () => {
  for (let i = 0; i < 6; i++) await Promise.resolve();
};

/** A mouth track that opens exactly where the audio is loud, frame by frame (the real model is tested in render/visemes). */
function loudnessMouth(): MouthStream {
  const carry: number[] = [];
  let frame = 0;
  const frames = (final: boolean): MouthFrame[] => {
    const out: MouthFrame[] = [];
    while (carry.length >= SPF || (final && carry.length > 0)) {
      const part = carry.splice(0, SPF);
      const loud = part.reduce((s, v) => s + Math.abs(v), 0) / part.length > 1000;
      out.push({
        time: frame++ / FPS,
        open: loud ? 0.8 : 0,
        wide: 0,
        round: 0,
        viseme: loud ? 'aa' : 'sil',
        closed: !loud,
      } as MouthFrame);
    }
    return out;
  };
  return {
    push: async (pcm) => {
      for (const v of pcm) carry.push(v);
      return frames(false);
    },
    end: async () => frames(true),
  };
}

function tone(samples: number, amp = 8000): Int16Array {
  const pcm = new Int16Array(samples);
  for (let i = 0; i < samples; i++) pcm[i] = Math.round(amp * Math.sin((2 * Math.PI * 220 * i) / SR));
  return pcm;
}

function setup(
  opts: {
    queueMs?: number;
    ppm?: number;
    lateMs?: number;
    maxBufferedSamples?: number;
    videoDelayMs?: number;
    mouthStream?: (() => MouthStream) | null;
    keepAudioSeconds?: number;
  } = {},
) {
  const clock = { t: 0 };
  const device = new SimDevice(clock, opts.queueMs ?? 100, opts.ppm ?? 0, opts.lateMs ?? 0);
  const events: PlayoutEvent[] = [];
  /** The call's audio as handed to the sink, by playout sample (what was dropped is written over). */
  const timeline: number[] = [];
  const playout = new SpeechPlayout({
    sink: device,
    fps: FPS,
    now: () => clock.t,
    onEvent: (e) => events.push(e),
    onDropped: (from) => {
      device.renumber(from);
      timeline.length = from;
    },
    onPushed: (at, pcm) => pcm.forEach((v, k) => (timeline[at + k] = v)),
    ...(opts.mouthStream === null ? {} : { mouthStream: opts.mouthStream ?? (() => loudnessMouth()) }),
    ...(opts.keepAudioSeconds ? { keepAudioSeconds: opts.keepAudioSeconds } : {}),
    ...(opts.maxBufferedSamples ? { maxBufferedSamples: opts.maxBufferedSamples } : {}),
    ...(opts.videoDelayMs ? { videoDelayMs: opts.videoDelayMs } : {}),
  });
  /** Runs the device until `ms` later, stopping at each of its 10 ms drains (or at `until`). */
  const advance = async (ms: number) => {
    const end = clock.t + ms;
    while (clock.t < end) {
      clock.t = Math.min(end, device.nextEvent);
      device.step();
      await flush();
    }
  };
  /** When the device first played speech (clock ms; -1 until then), as `listen` saw it. */
  const heard = { at: -1 };
  /** Advances up to `ms`, a millisecond at a time, noting when speech is first heard; with `untilHeard`, stops there. */
  const listen = async (ms: number, untilHeard = false) => {
    for (let i = 0; i < ms && !(untilHeard && heard.at >= 0); i++) {
      await advance(1);
      if (heard.at < 0 && device.heardAt(device.truePosition())) heard.at = clock.t;
    }
  };
  return { clock, device, events, playout, advance, heard, listen, timeline };
}

const CALL_MS = Number(process.env.PLAYOUT_CALL_MS ?? 600_000);

describe('speech playout (the A/V synchronizer)', () => {
  it(
    'keeps video frames within ±20 ms of the audio over a 10-minute call, with drifting device clocks and late ticks',
    { timeout: 120_000 },
    async () => {
      for (const ppm of [+300, -300]) {
        const { clock, device, playout, advance } = setup({ ppm });
        playout.start();
        let seed = 7;
        const rand = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
        const offsets: number[] = [];
        let lastFrame = -1;
        let nextSpeech = 1000;
        let seg = 0;
        let nextTick = 0;
        let speechFrames = 0;
        let mismatched = 0;
        while (clock.t < CALL_MS) {
          if (clock.t >= nextSpeech) {
            // A reply of 1 to 6 s arrives faster than real time, as TTS audio does.
            const id = `s${seg++}`;
            playout.begin(id);
            playout.push(id, tone(Math.round(SR * (1 + rand() * 5))));
            playout.end(id);
            nextSpeech = clock.t + 3000 + rand() * 6000;
          }
          if (clock.t >= nextTick) {
            const f = playout.frameAt(clock.t, lastFrame);
            const frame = f.frame;
            if (frame !== lastFrame) {
              expect(frame).toBeGreaterThan(lastFrame);
              lastFrame = frame;
              offsets.push(((frame * SPF - device.truePosition()) * 1000) / SR);
              // The picture shows speech exactly when speech is heard (a 1-frame edge allowed).
              const heard = device.heardAt(frame * SPF);
              const shown = f.mouth !== null && f.mouth.open > 0;
              if (shown) speechFrames++;
              if (heard !== shown) mismatched++;
            }
            // As the host ticks: every 10 ms or when the next frame falls due if sooner, up to 8 ms late,
            // and a 150 ms stall of the event loop now and then.
            const wake = Math.min(10, playout.msUntilFrame(lastFrame + 1, clock.t) || 10);
            nextTick = clock.t + wake + rand() * 8 + (rand() < 0.001 ? 150 : 0);
          }
          await advance(Math.max(0.5, Math.min(nextTick, nextSpeech) - clock.t));
        }
        await playout.stop();
        const first = offsets.slice(0, 1500);
        const last = offsets.slice(-1500);
        const mean = (a: number[]) => a.reduce((s, v) => s + v, 0) / a.length;
        const worst = Math.max(...offsets.map(Math.abs));
        const sorted = offsets.map(Math.abs).sort((a, b) => a - b);
        const p99 = sorted[Math.floor(sorted.length * 0.99)]!;
        expect(offsets.length).toBeGreaterThan((CALL_MS / 1000) * FPS * 0.95);
        expect(worst, `worst A/V offset ${worst.toFixed(1)} ms at ${ppm} ppm`).toBeLessThanOrEqual(20);
        // On-time ticks (all but the stalls) land within a few milliseconds.
        expect(p99, `p99 A/V offset at ${ppm} ppm`).toBeLessThanOrEqual(13);
        // No drift: the offset at the end of the call is where it was at the start.
        expect(Math.abs(mean(last) - mean(first)), `drift at ${ppm} ppm`).toBeLessThan(2);
        expect(speechFrames).toBeGreaterThan((CALL_MS / 1000) * 5);
        expect(mismatched / offsets.length).toBeLessThan(0.03);
      }
    },
  );

  it('says when the next frame falls due, so a frame is shown on time rather than at the next tick', async () => {
    const { playout, advance } = setup();
    playout.start();
    playout.begin('s');
    playout.push('s', tone(SR * 2));
    playout.end('s');
    await advance(300);
    for (let i = 0; i < 20; i++) {
      const { frame } = playout.frameAt();
      const ms = playout.msUntilFrame(frame + 1);
      expect(ms).toBeGreaterThan(0);
      expect(ms).toBeLessThanOrEqual(1000 / FPS + 1);
      await advance(Math.max(0, ms - 2));
      expect(playout.frameAt(undefined, frame).frame).toBe(frame);
      await advance(3);
      expect(playout.frameAt(undefined, frame).frame).toBe(frame + 1);
    }
    expect(playout.msUntilFrame(0)).toBe(0);
    await playout.stop();
  });

  it("keeps frames on their audio when the sink's acceptances reach it late (a busy event loop), without jitter", async () => {
    const { clock, device, playout, advance } = setup({ lateMs: 15, ppm: 300 });
    playout.start();
    const offsets: number[] = [];
    const shownAt: number[] = [];
    let lastFrame = -1;
    await advance(2000);
    while (clock.t < 62_000) {
      const { frame } = playout.frameAt(clock.t, lastFrame);
      if (frame !== lastFrame) {
        lastFrame = frame;
        offsets.push(((frame * SPF - device.truePosition()) * 1000) / SR);
        shownAt.push(clock.t);
      }
      await advance(Math.max(0.5, playout.msUntilFrame(lastFrame + 1, clock.t)));
    }
    await playout.stop();
    const abs = offsets.map(Math.abs).sort((a, b) => a - b);
    expect(abs[Math.floor(abs.length * 0.99)], 'p99 |A/V offset|, ms').toBeLessThan(6);
    const intervals = shownAt
      .slice(1)
      .map((t, i) => t - shownAt[i]!)
      .sort((a, b) => a - b);
    expect(intervals[Math.floor(intervals.length * 0.95)], 'p95 frame interval, ms').toBeLessThan(45);
    expect(playout.health.underruns).toBe(0);
  });

  it('holds each frame videoDelayMs behind its audio (audio takes longer to reach a viewer), over a whole call', async () => {
    const { clock, device, playout, advance } = setup({ videoDelayMs: 30, ppm: 300 });
    playout.start();
    const offsets: number[] = [];
    let lastFrame = -1;
    while (clock.t < 20_000) {
      const { frame } = playout.frameAt(clock.t, lastFrame);
      if (frame !== lastFrame) {
        lastFrame = frame;
        // The frame's time against the audio being played when it is shown: 30 ms behind.
        offsets.push(((device.truePosition() - frame * SPF) * 1000) / SR);
      }
      await advance(Math.max(0.5, playout.msUntilFrame(lastFrame + 1, clock.t)));
    }
    await playout.stop();
    const sorted = offsets.slice(5).sort((a, b) => a - b);
    expect(sorted[Math.floor(sorted.length / 2)]).toBeGreaterThan(25);
    expect(sorted[Math.floor(sorted.length / 2)]).toBeLessThan(35);
    expect(sorted[0]).toBeGreaterThan(15);
    expect(sorted.at(-1)).toBeLessThan(45);
  });

  it('counts the audio a call loses: the queue running dry in a stall, and silence inside a segment whose audio comes late', async () => {
    const { clock, device, playout, advance } = setup();
    playout.start();
    await advance(1000);
    expect(playout.health).toEqual({ underruns: 0, underrunMs: 0, starvedMs: 0 });
    // The event loop stalls for 300 ms: the device plays its 100 ms queue, then nothing.
    clock.t += 300;
    device.step();
    await advance(200);
    expect(playout.health.underruns).toBe(1);
    expect(playout.health.underrunMs).toBeGreaterThan(170);
    expect(playout.health.underrunMs).toBeLessThan(230);
    // A sender slower than real time: 200 ms of speech, then 300 ms of nothing, then the rest.
    playout.begin('slow');
    playout.push('slow', tone(SR * 0.2));
    await advance(500);
    playout.push('slow', tone(SR * 0.2));
    playout.end('slow');
    await advance(1000);
    // The segment starts at once (in place of the queued silence): its 200 ms are in the sink within
    // 100 ms, and silence fills in for 400 ms until the rest arrives.
    expect(playout.health.starvedMs).toBeGreaterThan(350);
    expect(playout.health.starvedMs).toBeLessThan(450);
    expect(playout.health.underruns).toBe(1);
    await playout.stop();
  });

  it('reports each segment finished exactly once: played out with its duration, or interrupted with the position reached', async () => {
    const { events, playout, advance } = setup();
    playout.start();
    playout.begin('a');
    playout.push('a', tone(SR)); // 1 s
    playout.end('a');
    playout.begin('b');
    playout.push('b', tone(SR * 2));
    playout.end('b');
    await advance(1500); // a done (1 s + the queue), b half a second in
    expect(events.filter((e) => e.type === 'finished')).toEqual([
      { type: 'finished', segmentId: 'a', positionSeconds: 1, interrupted: false },
    ]);
    playout.begin('c'); // queued behind b, never played
    playout.push('c', tone(SR));
    playout.interrupt();
    const finished = events.filter((e) => e.type === 'finished');
    expect(finished.map((e) => e.type === 'finished' && [e.segmentId, e.interrupted])).toEqual([
      ['a', false],
      ['b', true],
      ['c', true],
    ]);
    const b = finished[1] as Extract<PlayoutEvent, { type: 'finished' }>;
    expect(b.positionSeconds).toBeGreaterThan(0.35);
    expect(b.positionSeconds).toBeLessThan(0.55);
    expect((finished[2] as Extract<PlayoutEvent, { type: 'finished' }>).positionSeconds).toBe(0);
    // Late data of an interrupted stream is dropped, and no second event comes for it.
    playout.push('c', tone(SR));
    playout.end('c');
    await advance(1500);
    expect(events.filter((e) => e.type === 'finished')).toHaveLength(3);
    expect(playout.frameAt().segmentId).toBeNull();
    expect(events.filter((e) => e.type === 'started').map((e) => e.segmentId)).toEqual(['a', 'b']);
  });

  it("lets go of an interrupted segment's mouth analysis, and of none that was ended (an analysis in a thread would stay there)", async () => {
    const closed: string[] = [];
    const ended: string[] = [];
    let n = 0;
    const tracked = (): MouthStream => {
      const id = `stream ${n++}`;
      const inner = loudnessMouth();
      return { push: inner.push, end: () => (ended.push(id), inner.end()), close: () => void closed.push(id) };
    };
    const { playout, advance } = setup({ mouthStream: tracked });
    playout.start();
    playout.begin('a');
    playout.push('a', tone(SR / 2));
    playout.end('a');
    await advance(1000);
    playout.begin('b');
    playout.push('b', tone(SR * 2));
    await advance(300);
    playout.interrupt();
    await advance(100);
    expect(ended).toEqual(['stream 0']);
    expect(closed).toEqual(['stream 1']);
  });

  it('stops the audio within one chunk of an interruption and closes the mouth', async () => {
    const { device, playout, advance } = setup();
    playout.start();
    playout.begin('a');
    playout.push('a', tone(SR * 3));
    playout.end('a');
    await advance(1000);
    expect(playout.frameAt().mouth?.open).toBeGreaterThan(0);
    playout.interrupt();
    const stoppedAt = device.played;
    await advance(200);
    // After the clear, only silence reaches the device: what it held is dropped, the chunk it was taking too
    // (the 10 ms it was playing may finish).
    for (let p = stoppedAt + (SR * 10) / 1000; p < device.played; p += SR / 100)
      expect(device.heardAt(p), `speech heard ${((p - stoppedAt) / SR) * 1000} ms after the interruption`).toBe(false);
    expect(playout.frameAt().mouth).toBeNull();
  });

  it('happy: pauses within one chunk, mouth closed; resumed, plays the rest, none of it lost or said twice, and reports it played out whole', async () => {
    // A device clock off by 137 ppm: the position a pause takes back from is between two samples.
    const { device, playout, advance, events, timeline } = setup({ ppm: 137 });
    playout.start();
    // Each sample tells its place in the segment (all loud).
    const speech = Int16Array.from({ length: SR * 3 }, (_, i) => 2000 + (i % 20_000));
    playout.begin('a');
    playout.push('a', speech);
    playout.end('a');
    await advance(1003.3);
    playout.pause();
    const pausedAt = device.played;
    await advance(1000);
    for (let p = pausedAt + SR / 100; p < device.played; p += SR / 100)
      expect(device.heardAt(p), `speech heard ${((p - pausedAt) / SR) * 1000} ms into the pause`).toBe(false);
    expect(playout.frameAt().mouth).toBeNull();
    expect(events.filter((e) => e.type === 'finished')).toEqual([]);
    playout.resume();
    await advance(2500);
    expect(events.at(-1)).toEqual({ type: 'finished', segmentId: 'a', positionSeconds: 3, interrupted: false });
    // What the sink played of it, in order: the whole segment, once.
    expect(Int16Array.from(timeline.filter((v) => v !== 0))).toEqual(speech);
  });

  it('error: a pause the sender then clears reports the position reached before the pause', async () => {
    const { playout, advance, events } = setup();
    playout.start();
    playout.begin('a');
    playout.push('a', tone(SR * 3));
    playout.end('a');
    await advance(1000);
    playout.pause();
    await advance(500);
    playout.interrupt();
    const finished = events.at(-1);
    expect(finished).toMatchObject({ type: 'finished', segmentId: 'a', interrupted: true });
    // About 1 s played (the start buffer and the chunk in flight aside), nothing during the pause.
    expect(finished?.type === 'finished' && finished.positionSeconds).toBeGreaterThan(0.8);
    expect(finished?.type === 'finished' && finished.positionSeconds).toBeLessThan(1);
    // The next reply plays: the pause ended with the one it held.
    playout.begin('b');
    playout.push('b', tone(SR / 2));
    playout.end('b');
    await advance(1000);
    expect(events.at(-1)).toEqual({ type: 'finished', segmentId: 'b', positionSeconds: 0.5, interrupted: false });
  });

  it("keeps a real-time sender's slack: its reply is not hurried into the sink, so a late chunk leaves no silence inside it", async () => {
    const { clock, playout, advance, heard, listen } = setup({ queueMs: 100 });
    playout.start();
    await advance(1000);
    const epoch = playout.epoch;
    const sentAt = clock.t;
    playout.begin('live');
    // 2 s of speech streamed in real time, 20 ms at a time; one chunk comes 60 ms late (then the sender catches up).
    const chunk = SR / 50;
    for (let i = 0; i < 100; i++) {
      const late = i === 40 ? 3 : i > 40 && i < 44 ? 0 : 1;
      if (i === 44) for (let k = 0; k < 3; k++) playout.push('live', tone(chunk));
      playout.push('live', tone(chunk));
      await listen(i === 40 ? 80 : late === 0 ? 0 : 20);
    }
    playout.end('live');
    await advance(500);
    // Heard after its start buffer and the queue (100 + 100 ms), as before: only a faster sender starts sooner.
    expect(heard.at - sentAt).toBeGreaterThan(150);
    expect(heard.at - sentAt).toBeLessThanOrEqual(230);
    expect(playout.epoch).toBe(epoch);
    expect(playout.health.starvedMs).toBe(0);
    await playout.stop();
  });

  it('starts a reply at once: the silence queued in the sink ahead of it is dropped, not played first; a reply still playing is heard to its end', async () => {
    const { clock, events, playout, advance, heard, listen } = setup({ queueMs: 100 });
    playout.start();
    await advance(1000);
    const epoch = playout.epoch;
    const due = playout.frameAt().frame;
    const drawnAhead = due + 2;
    const pushedAt = clock.t;
    playout.begin('a');
    playout.push('a', tone(SR));
    playout.end('a');
    // The device hears the reply within one of its 10 ms steps, not after the 100 ms of queued silence.
    await listen(200, true);
    expect(heard.at - pushedAt, 'ms from the reply arriving to its first sample playing').toBeLessThanOrEqual(20);
    expect(events).toEqual([{ type: 'started', segmentId: 'a' }]);
    // Frames drawn ahead before it showed silence where the reply now plays: no longer current. The frame shown then still is.
    expect(playout.epoch).not.toBe(epoch);
    expect(playout.frameCurrent(drawnAhead, epoch)).toBe(false);
    expect(playout.frameCurrent(due - 1, epoch)).toBe(true);
    expect(playout.frameCurrent(drawnAhead, playout.epoch)).toBe(true);
    // The mouth opens with the sound.
    await advance(100);
    expect(playout.frameAt().mouth?.open).toBeGreaterThan(0);
    // A second reply arriving while the first plays waits for it: nothing of the first is dropped.
    await advance(400);
    const before = playout.epoch;
    playout.begin('b');
    playout.push('b', tone(SR * 0.5));
    playout.end('b');
    await advance(1200);
    expect(playout.epoch).toBe(before);
    expect(events.filter((e) => e.type === 'finished')).toEqual([
      { type: 'finished', segmentId: 'a', positionSeconds: 1, interrupted: false },
      { type: 'finished', segmentId: 'b', positionSeconds: 0.5, interrupted: false },
    ]);
    await playout.stop();
  });

  it('starts a reply at once though the pump takes a chunk in the middle of its burst: it waits for the rest rather than start behind the queued silence', async () => {
    const { clock, playout, advance, heard, listen } = setup({ queueMs: 100 });
    playout.start();
    await advance(1000);
    const epoch = playout.epoch;
    const pushedAt = clock.t;
    playout.begin('a');
    // A sender faster than real time: 120 ms at once (more than the start buffer, less than it and the
    // queue), the pump takes chunks, and the rest comes 20 ms later.
    playout.push('a', tone(SR * 0.12));
    await listen(20);
    playout.push('a', tone(SR));
    playout.end('a');
    await listen(280, true);
    expect(heard.at - pushedAt, 'ms from the reply arriving to its first sample playing').toBeLessThanOrEqual(45);
    expect(playout.epoch).not.toBe(epoch);
    await advance(1500);
    expect(playout.health.starvedMs).toBe(0);
    await playout.stop();
  });

  it('keeps its clock through interruptions: the chunk the sink held when cleared never plays, and is not counted', async () => {
    const { clock, device, playout, advance } = setup({ ppm: 300 });
    playout.start();
    const offsets: number[] = [];
    const levels: number[] = [];
    let lastFrame = -1;
    await advance(1000);
    for (let i = 0; i < 40; i++) {
      playout.begin(`s${i}`);
      playout.push(`s${i}`, tone(SR * 2));
      playout.end(`s${i}`);
      const until = clock.t + 400 + (i % 7) * 37;
      while (clock.t < until) {
        const { frame, level } = playout.frameAt(clock.t, lastFrame);
        if (frame !== lastFrame) {
          lastFrame = frame;
          offsets.push(((frame * SPF - device.truePosition()) * 1000) / SR);
          levels.push(level);
        }
        await advance(Math.max(0.5, Math.min(10, playout.msUntilFrame(lastFrame + 1, clock.t))));
      }
      playout.interrupt();
      await advance(300);
    }
    await playout.stop();
    // Counting a dropped chunk would put the clock 20 ms further ahead at each interruption. A frame
    // or two just after one may be up to two of the sink's 10 ms steps behind (the clock restarts
    // from when the sink took the first new chunk), and are back on their audio from the next.
    const late = offsets
      .slice(-100)
      .map(Math.abs)
      .sort((a, b) => a - b);
    expect(late[50], 'median |A/V offset| near the end, ms').toBeLessThanOrEqual(3);
    expect(late.at(-1), 'worst |A/V offset| near the end, ms').toBeLessThanOrEqual(20);
    // The clock restarts on a whole sample (a drifting device makes positions fractional): the audio laid out after it is read back.
    expect(levels.every(Number.isFinite)).toBe(true);
    expect(levels.filter((l) => l > 3000).length).toBeGreaterThan(levels.length / 2);
  });

  it('waits for a little audio before starting a segment, rides out a slow producer, and finishes an empty segment at once', async () => {
    const { events, playout, advance, device } = setup();
    playout.start();
    playout.begin('slow');
    playout.push('slow', tone(SR * 0.05)); // 50 ms: under the 100 ms start buffer
    await advance(300);
    expect(events).toEqual([]);
    expect(device.loud.some((v) => v > 0)).toBe(false);
    playout.push('slow', tone(SR * 0.1));
    await advance(300);
    expect(events.map((e) => e.type)).toEqual(['started']);
    // The producer stalls 400 ms mid-segment (silence fills in), then finishes.
    await advance(400);
    playout.push('slow', tone(SR * 0.2));
    playout.end('slow');
    await advance(600);
    expect(events.at(-1)).toEqual({ type: 'finished', segmentId: 'slow', positionSeconds: 0.35, interrupted: false });

    playout.begin('empty');
    playout.end('empty');
    expect(events.at(-1)).toEqual({ type: 'finished', segmentId: 'empty', positionSeconds: 0, interrupted: false });
  });

  it('holds at most maxBufferedSamples of unplayed audio, all segments together: the excess is dropped and said so, and room comes back as it plays', async () => {
    const { events, playout, advance, device } = setup({ maxBufferedSamples: SR * 10 });
    playout.start();
    // Many long streams at once, far more than the bound together (each under it).
    const accepted: boolean[] = [];
    for (let i = 0; i < 8; i++) {
      playout.begin(`s${i}`);
      accepted.push(playout.push(`s${i}`, tone(SR * 4)));
    }
    expect(accepted).toEqual([true, true, false, false, false, false, false, false]);
    for (let i = 0; i < 8; i++) playout.end(`s${i}`);
    // The third got what was left (2 s), those after nothing: they finish at once, as played at 0.
    expect(
      events.filter((e) => e.type === 'finished').map((e) => e.type === 'finished' && [e.segmentId, e.positionSeconds]),
    ).toEqual([
      ['s3', 0],
      ['s4', 0],
      ['s5', 0],
      ['s6', 0],
      ['s7', 0],
    ]);
    // What was kept plays in full: 4 + 4 + 2 s.
    await advance(10_500);
    expect(
      events
        .filter((e) => e.type === 'finished' && !e.interrupted)
        .map((e) => e.type === 'finished' && [e.segmentId, e.positionSeconds])
        .slice(-3),
    ).toEqual([
      ['s0', 4],
      ['s1', 4],
      ['s2', 2],
    ]);
    expect(device.played).toBeGreaterThanOrEqual(SR * 10);
    // Played out, the room is back; an interruption frees what it drops too.
    playout.begin('next');
    expect(playout.push('next', tone(SR * 8))).toBe(true);
    playout.interrupt();
    playout.begin('after');
    expect(playout.push('after', tone(SR * 9))).toBe(true);
    expect(playout.push('after', tone(SR * 2))).toBe(false);
    await playout.stop();
  });

  it('knows what a frame shows only once its audio is in the sink and its mouth analysed: a frame drawn sooner would show a closed mouth', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const inner = loudnessMouth();
    const slowMouth: MouthStream = {
      push: async (pcm) => {
        await gate;
        return inner.push(pcm);
      },
      end: async () => {
        await gate;
        return inner.end();
      },
    };
    const { playout, advance } = setup({ queueMs: 60, mouthStream: () => slowMouth });
    playout.start();
    await advance(200);
    // Silence in the sink to the due frame's end: settled. Beyond what the sink holds (60 + 20 ms): not yet.
    const due = playout.frameAt().frame;
    expect(playout.frameKnown(due)).toBe(true);
    expect(playout.frameKnown(due + 3)).toBe(false);
    // Speech reaches the sink, its mouth still being analysed: not settled, and a frame drawn now would be closed.
    playout.begin('a');
    playout.push('a', tone(SR));
    playout.end('a');
    await advance(300);
    const speaking = playout.frameAt().frame;
    expect(playout.frameContent(speaking).segmentId).toBe('a');
    expect(playout.frameContent(speaking).mouth).toBeNull();
    expect(playout.frameKnown(speaking)).toBe(false);
    release();
    await flush();
    await flush();
    expect(playout.frameKnown(speaking)).toBe(true);
    expect(playout.frameContent(speaking).mouth?.open).toBeGreaterThan(0);
    await playout.stop();
  });

  it("knows a playing segment's frames beyond the sink, as far as its received audio goes: a real-time sender's frames are drawn a start buffer sooner", async () => {
    const { playout, device, advance } = setup({ queueMs: 60 });
    playout.start();
    await advance(200);
    // A sender streaming in real time: 20 ms at a time, at the pace it plays.
    playout.begin('a');
    for (let t = 0; t < 800; t += 20) {
      playout.push('a', tone(SPF / 2));
      await advance(20);
    }
    // A frame wholly past what the sink holds, inside what the segment has received (its start buffer).
    const beyondSink = Math.ceil(device.pushed / SPF);
    expect(playout.frameKnown(beyondSink)).toBe(true);
    expect(playout.frameContent(beyondSink).segmentId).toBe('a');
    expect(playout.frameContent(beyondSink).mouth?.open).toBeGreaterThan(0);
    // Past what has been received: not yet (a gap may come there).
    expect(playout.frameKnown(beyondSink + 4)).toBe(false);
    // An interruption drops it: a frame drawn for it before is drawn again.
    const drawnAt = playout.epoch;
    playout.interrupt();
    expect(playout.frameCurrent(beyondSink, drawnAt)).toBe(false);
    expect(playout.frameContent(beyondSink).mouth).toBeNull();
    await playout.stop();
  });

  it("analyses a segment's mouth at the pace of playout: a long segment arriving at once is analysed only a little ahead of what plays", async () => {
    let analysed = 0;
    let ended = 0;
    const inner = loudnessMouth();
    const counting: MouthStream = {
      push: (pcm) => {
        analysed += pcm.length;
        return inner.push(pcm);
      },
      end: () => {
        ended++;
        return inner.end();
      },
    };
    const { playout, advance } = setup({ mouthStream: () => counting });
    playout.start();
    playout.begin('long');
    for (let i = 0; i < 60; i++) playout.push('long', tone(SR)); // a minute, all at once, in 1 s chunks
    playout.end('long');
    await advance(100);
    expect(analysed / SR).toBeGreaterThanOrEqual(2);
    expect(analysed / SR).toBeLessThanOrEqual(3);
    await advance(10_000);
    expect(analysed / SR).toBeGreaterThanOrEqual(11);
    expect(analysed / SR).toBeLessThanOrEqual(13);
    // The mouth is there where the audio plays.
    expect(playout.frameAt().mouth?.open).toBeGreaterThan(0);
    expect(ended).toBe(0);
    await advance(51_000);
    expect(analysed).toBe(SR * 60);
    expect(ended).toBe(1);
    await playout.stop();
  });

  it("analyses a real-time sender's 20 ms chunks in pairs (a model run costs about as much for 20 ms as for 40) and a segment's last audio however short", async () => {
    const pushed: number[] = [];
    let ended = false;
    const inner = loudnessMouth();
    const { playout, advance } = setup({
      mouthStream: () => ({
        push: (pcm) => {
          pushed.push(pcm.length);
          return inner.push(pcm);
        },
        end: () => {
          ended = true;
          return inner.end();
        },
      }),
    });
    playout.start();
    playout.begin('reply');
    const chunk = SR / 50;
    for (let i = 0; i < 5; i++) {
      playout.push('reply', tone(chunk));
      await advance(20);
    }
    expect(pushed).toEqual([2 * chunk, 2 * chunk]);
    playout.end('reply');
    await advance(400);
    expect(pushed).toEqual([2 * chunk, 2 * chunk, chunk]);
    expect(ended).toBe(true);
    await playout.stop();
  });

  it("gives a neural model each frame's audio as it plays: what went to the sink, then the playing segment's queue, then silence; none in silence", async () => {
    const { playout, advance, timeline, events } = setup({ keepAudioSeconds: 1, mouthStream: null });
    const span = (k: number) => frameAudioSpan(k, FPS, SR);
    const buffer = new Int16Array(new SharedArrayBuffer(2 * span(0).length));
    playout.start();
    await advance(300);
    expect(playout.frameAudio(3, buffer)).toBeNull(); // silence all through its window

    // A 1.2 s reply, all of it at once (most TTS): each frame drawn a little ahead of playout hears
    // exactly the audio that then plays around it, the reply's queue included.
    playout.begin('reply');
    playout.push('reply', tone(Math.round(SR * 1.2)));
    playout.end('reply');
    const heard = new Map<number, Int16Array>();
    for (let t = 0; t < 2000; t += 10) {
      await advance(10);
      const k = Math.floor(playout.position() / SPF) + 2;
      const audio = playout.frameAudio(k, buffer);
      if (audio) {
        expect(audio).toMatchObject({ sampleRate: SR, frame: k, fps: FPS });
        expect(audio.pcm.buffer).toBe(buffer.buffer); // shared: a lip-sync thread reads it in place
        heard.set(k, Int16Array.from(audio.pcm));
      }
    }
    expect(events.some((e) => e.type === 'finished' && !e.interrupted)).toBe(true);
    // The reply's frames, and those whose window reaches into it, heard it; none long after it.
    expect(heard.size).toBeGreaterThanOrEqual(1.2 * FPS);
    for (const [k, pcm] of heard) {
      const { start } = span(k);
      const played = Int16Array.from(pcm, (_, j) => timeline[start + j] ?? 0);
      expect(Buffer.compare(Buffer.from(pcm.buffer), Buffer.from(played.buffer)), `frame ${k}`).toBe(0);
    }
    const last = Math.max(...heard.keys());
    expect(playout.frameAudio(last + 10, buffer)).toBeNull();

    // Interrupted: what no longer plays is no longer heard.
    playout.begin('cut');
    playout.push('cut', tone(SR * 2));
    playout.end('cut');
    await advance(400);
    const k = Math.floor(playout.position() / SPF) + 2;
    expect(playout.frameAudio(k, buffer)).not.toBeNull();
    playout.interrupt();
    await advance(100);
    expect(playout.frameAudio(Math.floor(playout.position() / SPF) + 12, buffer)).toBeNull();
    expect(() => setup().playout.frameAudio(0, buffer)).toThrow(/keepAudioSeconds/);
    await playout.stop();
  });
});
