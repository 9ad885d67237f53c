/**
 * Speech playout on one clock: the A/V synchronizer of a call (rtc-node has none).
 *
 * rtc-node publishes audio from a native queue that it drains in real time, and pushes back:
 * `AudioSource.captureFrame` resolves only once the chunk fits in that queue. A pump keeps the
 * queue full at all times (silence between speech segments), so the sample being played now is
 * the count of samples accepted, minus the queue's size, plus the time since the last acceptance.
 * That position is the call's media clock. Video frames are rendered for it (the mouth from the
 * segment playing at that position, the body's frame from its frame number), so audio and video
 * cannot drift apart whatever the timers do: the audio device's pace is the only pace.
 *
 * Segments follow LiveKit's avatar protocol: one per `lk.audio_stream` byte stream, each answered
 * by exactly one "finished" event (played out, or interrupted with the position reached), which the
 * receiver turns into an `lk.playback_finished` RPC.
 */
import { frameAudioSpan, type FrameAudio } from '../../render/lipsync/index.ts';
import type { MouthFrame } from '../../render/visemes/index.ts';

/** How long a clock observation is used: long enough to hold one that came on time, short enough that device drift (±300 ppm) stays under 0.3 ms. */
const ANCHOR_WINDOW_MS = 1000;

/** How far ahead of playout a segment's mouth is analysed: the frames drawn ahead, the model's look-ahead, and slack for a busy machine. */
const MOUTH_LEAD_SECONDS = 2;

/**
 * The least audio given to the mouth stream at once (but a segment's last): the viseme model's run
 * costs about the same for 20 ms of audio as for 80, so a sender's 20 ms chunks go in pairs (0.6x
 * the analysis time; the mouth then trails what has arrived by at most this much more, well within
 * the start buffer and the sink's queue ahead of what plays).
 */
const MOUTH_STEP_SECONDS = 0.04;

/** Where the audio goes: rtc-node's AudioSource in a call, a simulated device in tests. */
export interface AudioSink {
  readonly sampleRate: number;
  /** How many samples the sink queues ahead of what it plays (its queue size). */
  readonly queueSamples: number;
  /** Resolves once `pcm` is queued; waits while the queue is full. */
  capture(pcm: Int16Array): Promise<void>;
  /** Drops everything queued and not yet played. */
  clear(): void;
}

/** Incremental audio → mouth frames (render/visemes AudioVisemeStream has this shape). */
export interface MouthStream {
  push(samples: Int16Array): Promise<MouthFrame[]>;
  end(): Promise<MouthFrame[]>;
  /** Lets go of a stream that will not be ended (an interrupted segment); after end, nothing. */
  close?(): void;
}

export type PlayoutEvent =
  | { type: 'started'; segmentId: string }
  | { type: 'finished'; segmentId: string; positionSeconds: number; interrupted: boolean };

export interface SpeechPlayoutOptions {
  sink: AudioSink;
  /** Video frame rate of the mouth track. */
  fps: number;
  /** Mouth frames for a segment's audio (at the sink's rate); none: no mouth (tests of timing alone). */
  mouthStream?: (sampleRate: number, fps: number) => MouthStream;
  onEvent: (event: PlayoutEvent) => void;
  /** A segment began arriving (its first audio). */
  onSegment?: (segmentId: string) => void;
  /** Every chunk handed to the sink, with the playout sample it plays at (for recording). */
  onPushed?: (at: number, pcm: Int16Array) => void;
  /** What was handed to the sink from playout sample `from` on was dropped unplayed (an interruption, or speech starting). */
  onDropped?: (from: number) => void;
  /** Milliseconds, monotonic. */
  now?: () => number;
  /** Samples per pushed chunk; default 20 ms. */
  chunkSamples?: number;
  /**
   * A segment starts playing once this much of it has arrived (or all of it): the mouth model needs
   * to hear a little ahead of the sample it shapes. Default 100 ms.
   */
  startBufferSamples?: number;
  /**
   * Most audio held at once, received and not yet handed to the sink, all segments together, in
   * samples; what arrives beyond it is dropped. Default 5 minutes: more than any spoken answer, and
   * a bound on what a sender that never stops (or sends many long streams at once) costs in memory.
   */
  maxBufferedSamples?: number;
  /**
   * How long after its audio leaves the sink a frame falls due, ms (default 0: at the same moment).
   * The audio's way to a viewer is longer than the video's (20 ms Opus frames, the receiver's jitter
   * buffer), and viewers of LiveKit rooms do not re-align the two: holding video back as much keeps
   * them together where they are seen.
   */
  videoDelayMs?: number;
  /**
   * Seconds of the audio handed to the sink kept for `audioAt` (a neural lip-sync model reads each
   * frame's audio). Default 0: none kept, and `audioAt` is not available.
   */
  keepAudioSeconds?: number;
}

interface Segment {
  id: string;
  chunks: Int16Array[];
  /** Samples received and not yet handed to the sink. */
  buffered: number;
  received: number;
  inputEnded: boolean;
  /** When its first audio arrived (ms, the playout's clock). */
  firstAt: number | null;
  /** Absolute sample index (pump clock) of its first and one-past-last pushed samples. */
  startAt: number | null;
  endAt: number | null;
  startedSent: boolean;
  done: boolean;
  mouth: MouthFrame[];
  mouthChain: Promise<void>;
  mouthStream: MouthStream | null;
  /** Audio received and not yet given to the mouth stream (it is analysed a little ahead of playout only). */
  mouthQueue: Int16Array[];
  /** Samples in mouthQueue. */
  mouthQueued: number;
  /** Samples given to the mouth stream. */
  mouthFed: number;
  mouthEnded: boolean;
  /** Every mouth frame of the segment is known (its stream ended and answered). */
  mouthComplete: boolean;
  /** The audio handed to the sink lately, by its offset in the segment: a pause takes back what has not played. */
  handed: { offset: number; pcm: Int16Array }[];
}

/** A stretch of pushed audio: which segment (and where in it) or silence. */
interface Span {
  start: number;
  length: number;
  segment: Segment | null;
  offset: number;
}

/** Where the call's playout stands at a moment. */
export interface PlayoutFrame {
  /** Playout position in samples since the pump started. */
  position: number;
  /** Video frame number of that position at `fps`. */
  frame: number;
  /** The segment playing there, null in silence. */
  segmentId: string | null;
  /** The mouth for that instant, null in silence (closed mouth). */
  mouth: MouthFrame | null;
  /** Mean absolute amplitude of the audio in the middle of that frame (0..32768), for sync markers and meters; 0 until that audio is in the sink. */
  level: number;
}

/** What a call's audio suffered, since the pump started (the cost of a short queue on a busy machine). */
export interface PlayoutHealth {
  /** Times the sink's queue ran dry (the process was stalled longer than the queue lasts), and for how long in all, ms. */
  underruns: number;
  underrunMs: number;
  /** Silence played inside a segment whose next audio had not arrived yet (a sender slower than real time), ms. */
  starvedMs: number;
}

export class SpeechPlayout {
  readonly sampleRate: number;
  readonly health: PlayoutHealth = { underruns: 0, underrunMs: 0, starvedMs: 0 };
  readonly fps: number;
  private readonly sink: AudioSink;
  private readonly now: () => number;
  private readonly chunkSamples: number;
  private readonly startBuffer: number;
  private readonly maxBuffered: number;
  /** Samples received and not yet handed to the sink, all segments together. */
  private buffered = 0;
  private readonly samplesPerFrame: number;
  private readonly videoDelay: number;
  private readonly segments: Segment[] = [];
  private readonly byId = new Map<string, Segment>();
  private spans: Span[] = [];
  private accepted = 0;
  private acceptedAt = 0;
  /**
   * Recent observations of the clock: at `at` (ms), sample `position` was playing. Each is read when
   * the sink's acceptance reaches us, which may be late (a busy event loop), never early; so the
   * furthest of their extrapolations to now is the truest, and a late callback neither holds video
   * back nor makes it jump. All extrapolate at one rate, so only those better than every later one
   * are kept (a sliding-window maximum): the first is the best, and reading the clock is O(1).
   */
  private anchors: { at: number; position: number }[] = [];
  private floor = 0;
  /**
   * Set when the sink's queue was dropped: the clock holds at the position it had until the next
   * chunk is accepted (the sink plays nothing in between), and then runs from there.
   */
  private restarting = false;
  private epochValue = 0;
  /** The playout sample from which audio was last dropped (what plays before it did not change). */
  private lastDrop = 0;
  private running = false;
  /** Speech holds (pause): silence is played, the segments wait. */
  private paused = false;
  private pump: Promise<void> | null = null;
  /** The audio handed to the sink (keepAudioSeconds of it), a ring indexed by playout sample; its end is the last chunk's. */
  private readonly history: Int16Array | null;
  private historyEnd = 0;

  constructor(private readonly o: SpeechPlayoutOptions) {
    this.sink = o.sink;
    this.sampleRate = o.sink.sampleRate;
    this.fps = o.fps;
    this.now = o.now ?? (() => performance.now());
    this.chunkSamples = o.chunkSamples ?? Math.round(this.sampleRate * 0.02);
    this.startBuffer = o.startBufferSamples ?? Math.round(this.sampleRate * 0.1);
    this.maxBuffered = o.maxBufferedSamples ?? this.sampleRate * 300;
    this.samplesPerFrame = this.sampleRate / this.fps;
    this.videoDelay = ((o.videoDelayMs ?? 0) * this.sampleRate) / 1000;
    this.history = o.keepAudioSeconds ? new Int16Array(Math.ceil(o.keepAudioSeconds * this.sampleRate)) : null;
  }

  /** Starts the pump: from now on the sink always has audio (speech or silence). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.acceptedAt = this.now();
    this.anchors = [{ at: this.acceptedAt, position: 0 }];
    this.pump = this.runPump();
  }

  /** Stops the pump; unfinished segments are reported interrupted. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.interruptAll();
    // A capture blocked on a full queue returns once the queue is cleared.
    this.sink.clear();
    await this.pump;
  }

  /** A new segment (one byte stream). */
  begin(id: string): void {
    if (this.byId.has(id)) return;
    const seg: Segment = {
      id,
      chunks: [],
      buffered: 0,
      received: 0,
      inputEnded: false,
      firstAt: null,
      startAt: null,
      endAt: null,
      startedSent: false,
      done: false,
      mouth: [],
      mouthChain: Promise.resolve(),
      mouthStream: this.o.mouthStream ? this.o.mouthStream(this.sampleRate, this.fps) : null,
      mouthQueue: [],
      mouthQueued: 0,
      mouthFed: 0,
      mouthEnded: false,
      mouthComplete: false,
      handed: [],
    };
    this.segments.push(seg);
    this.byId.set(id, seg);
    this.o.onSegment?.(id);
  }

  /**
   * Audio of a segment, at the sink's rate. Ignored once the segment is done (interrupted). Answers
   * false when some of it was dropped: the call holds `maxBufferedSamples` already.
   */
  push(id: string, pcm: Int16Array): boolean {
    const seg = this.byId.get(id);
    if (!seg || seg.done || seg.inputEnded || pcm.length === 0) return true;
    const room = this.maxBuffered - this.buffered;
    if (room <= 0) return false;
    const part = pcm.length > room ? pcm.subarray(0, room) : pcm;
    seg.firstAt ??= this.now();
    seg.chunks.push(part);
    seg.buffered += part.length;
    seg.received += part.length;
    this.buffered += part.length;
    if (seg.mouthStream) {
      seg.mouthQueue.push(part);
      seg.mouthQueued += part.length;
    }
    this.feedMouth(seg);
    this.startSpeechNow();
    return part.length === pcm.length;
  }

  /** The segment's stream closed: it plays to its end, then reports finished. */
  end(id: string): void {
    const seg = this.byId.get(id);
    if (!seg || seg.inputEnded) return;
    seg.inputEnded = true;
    this.feedMouth(seg);
    // An empty segment finishes at once (nothing to play).
    if (seg.received === 0 && seg.startAt === null) this.finish(seg, false);
    else this.startSpeechNow();
  }

  /** `lk.clear_buffer`: stop speaking now. Every unfinished segment is reported interrupted. */
  interrupt(): void {
    this.paused = false;
    const position = this.position();
    this.interruptAll(position);
    this.dropQueued(position);
  }

  /**
   * Stop speaking now, and keep what is left to say: the sender may resume it (its interruption
   * was noise) or clear it. The audio in the sink that has not played goes back to its segment,
   * which then waits, silent, mouth closed, as the segments after it do. New audio is still taken.
   */
  pause(): void {
    if (this.paused) return;
    this.paused = true;
    const position = this.position();
    const seg = this.segments.find((s) => !s.done && s.startAt !== null);
    if (!seg) return;
    const handedTo = seg.received - seg.buffered;
    // Whole samples (the position is fractional), as dropQueued numbers what plays next.
    const playedTo = Math.ceil(this.playedSamples(seg, position));
    const back = seg.handed.filter((h) => h.offset + h.pcm.length > playedTo);
    // Taken back only when all of it is at hand; else the sink plays out what it holds (100 ms).
    if (playedTo >= handedTo || back.length === 0 || back[0]!.offset > playedTo) return;
    const chunks = back.map((h) => (h.offset < playedTo ? h.pcm.subarray(playedTo - h.offset) : h.pcm));
    const samples = chunks.reduce((n, c) => n + c.length, 0);
    seg.chunks.unshift(...chunks);
    seg.buffered += samples;
    this.buffered += samples;
    seg.handed = [];
    seg.endAt = null;
    this.dropQueued(position);
  }

  /** The paused segment plays on from where it stopped. */
  resume(): void {
    this.paused = false;
  }

  /**
   * Changes whenever audio handed to the sink is dropped unplayed (an interruption, or speech
   * starting in place of queued silence): a frame drawn ahead before then may show what no longer plays.
   */
  get epoch(): number {
    return this.epochValue;
  }

  /** Whether frame `frame`, drawn at playout epoch `epoch`, still shows what plays: no audio it covers was dropped since. */
  frameCurrent(frame: number, epoch: number): boolean {
    if (epoch === this.epochValue) return true;
    return epoch === this.epochValue - 1 && (frame + 1) * this.samplesPerFrame <= this.lastDrop;
  }

  /** Audio held, received and not yet handed to the sink, in seconds. */
  get bufferedSeconds(): number {
    return this.buffered / this.sampleRate;
  }

  /** True while a segment is queued or playing. */
  get speaking(): boolean {
    return this.segments.some((s) => !s.done);
  }

  /** Playout position (samples since the pump started) at `now`. Never goes back, nor past what the sink was given. */
  position(now = this.now()): number {
    if (!this.running && this.accepted === 0) return 0;
    if (this.restarting) return this.floor;
    const best = this.anchors[0]!;
    const p = best.position + ((now - best.at) * this.sampleRate) / 1000;
    this.floor = Math.max(this.floor, Math.min(p, this.accepted), 0);
    return this.floor;
  }

  /**
   * The video frame due at `now` (the one whose time playout has reached, `videoDelayMs` ago), with
   * the segment and mouth at that frame's time. `lastShown` is the frame the caller showed last: when
   * a late tick finds an unshown frame more than half over, the next frame (nearer in time) is due
   * instead, so no frame is ever shown more than half a frame off its audio. Also reports segments
   * that started or ended by then.
   */
  frameAt(now = this.now(), lastShown = -1): PlayoutFrame {
    const position = this.position(now);
    this.settle(position);
    const shownAt = position - this.videoDelay;
    let frame = Math.max(0, Math.floor(shownAt / this.samplesPerFrame));
    if (frame > lastShown && shownAt - frame * this.samplesPerFrame > this.samplesPerFrame / 2) frame += 1;
    // Never back: a frame taken early after a late tick stays until its successor is due.
    frame = Math.max(frame, lastShown);
    return { position, ...this.frameContent(frame) };
  }

  /** About how long until `frame` is due (frameAt would give it), in ms; 0 when it is due already. */
  msUntilFrame(frame: number, now = this.now()): number {
    const samples = frame * this.samplesPerFrame + this.videoDelay - this.position(now);
    return Math.max(0, (samples * 1000) / this.sampleRate);
  }

  /**
   * Whether what frame `frame` shows is settled: its audio, to the frame's end, is in the sink or is
   * audio the playing segment has received and not yet handed over (either way, what plays then can
   * no longer change but by an interruption) and, where a segment plays, the mouth for it is
   * analysed. Drawn sooner, a frame would show a closed mouth where speech plays.
   */
  frameKnown(frame: number): boolean {
    if (!this.spanAhead((frame + 1) * this.samplesPerFrame - 1)) return false;
    const at = frame * this.samplesPerFrame;
    const span = this.spanAhead(at);
    const seg = span?.segment;
    if (!span || !seg?.mouthStream || seg.done || seg.mouthComplete) return true;
    return this.mouthIndex(span, at) < seg.mouth.length;
  }

  /**
   * What frame `frame` shows: the segment and mouth at its time, and the loudness there. Frames a
   * little ahead of playout can be asked for (their audio is already queued): the renderer draws
   * the next frame while the current one shows.
   */
  frameContent(frame: number): Omit<PlayoutFrame, 'position'> {
    const at = frame * this.samplesPerFrame;
    const span = this.spanAhead(at);
    const level = this.levelAt(at + this.samplesPerFrame / 2);
    if (!span || !span.segment) return { frame, segmentId: null, mouth: null, level };
    const seg = span.segment;
    const j = this.mouthIndex(span, at);
    // Mouth frames come from the model a little behind the audio; hold the last one briefly rather than blink shut.
    const mouth = j < seg.mouth.length + 3 ? (seg.mouth[Math.min(j, seg.mouth.length - 1)] ?? null) : null;
    return { frame, segmentId: seg.id, mouth, level };
  }

  /**
   * What a neural lip-sync model hears for frame `frame`: the audio its mel window reads
   * (frameAudioSpan), as far as it is known now, written into `buffer` (the frame's own, reused; on
   * a SharedArrayBuffer, a lip-sync thread reads it in place). Null when all of it is silence: the
   * frame shows the clip as it is. Needs `keepAudioSeconds`.
   */
  frameAudio(frame: number, buffer: Int16Array): FrameAudio | null {
    const { start, length } = frameAudioSpan(frame, this.fps, this.sampleRate);
    if (buffer.length < length)
      throw new RangeError(`frame ${frame}'s audio is ${length} samples; the buffer holds ${buffer.length}`);
    const pcm = buffer.subarray(0, length);
    return this.audioAt(start, pcm) ? { pcm, sampleRate: this.sampleRate, frame, fps: this.fps } : null;
  }

  /**
   * The call's audio from playout sample `from` on, into `out` (at the sink's rate): what was handed
   * to the sink (the last `keepAudioSeconds` of it), then what the playing segment has received and
   * not yet handed over (it plays next, sample after sample: spanAhead), then silence where nothing
   * is known yet. True when any of it is not silence.
   */
  private audioAt(from: number, out: Int16Array): boolean {
    const h = this.history;
    if (!h) throw new Error("a frame's audio is kept only with keepAudioSeconds");
    out.fill(0);
    let sound = false;
    const end = from + out.length;
    for (let p = Math.max(from, this.historyEnd - h.length, 0); p < Math.min(end, this.historyEnd); p++) {
      const v = h[p % h.length]!;
      out[p - from] = v;
      if (v !== 0) sound = true;
    }
    const last = this.spans[this.spans.length - 1];
    const seg = last?.segment;
    if (!last || !seg || seg.done || seg.endAt !== null || last.start + last.length !== this.historyEnd) return sound;
    let p = this.historyEnd;
    for (const chunk of seg.chunks) {
      if (p >= end) break;
      for (let k = Math.max(0, from - p); k < chunk.length && p + k < end; k++) {
        const v = chunk[k]!;
        out[p + k - from] = v;
        if (v !== 0) sound = true;
      }
      p += chunk.length;
    }
    return sound;
  }

  // ---------------------------------------------------------------------------------------------

  /** The index, in the mouth frames of `span`'s segment, of playout sample `at` (which `span` covers). */
  private mouthIndex(span: Span, at: number): number {
    return Math.floor((span.offset + (at - span.start)) / this.samplesPerFrame);
  }

  /**
   * Gives the mouth stream the segment's audio up to MOUTH_LEAD_SECONDS ahead of what the pump has
   * taken of it, MOUTH_STEP_SECONDS or more at a time (and closes the stream after its last
   * sample): the analysis runs at the pace of
   * playout, so a segment that arrives all at once (minutes of it) never takes the CPU from the
   * frames of every call at once.
   */
  private feedMouth(seg: Segment): void {
    const stream = seg.mouthStream;
    if (!stream || seg.done || seg.mouthEnded) return;
    const taken = seg.received - seg.buffered;
    const upTo = taken + this.sampleRate * MOUTH_LEAD_SECONDS;
    const step = Math.round(this.sampleRate * MOUTH_STEP_SECONDS);
    while (seg.mouthQueued > 0 && seg.mouthFed < upTo && (seg.mouthQueued >= step || seg.inputEnded)) {
      const parts: Int16Array[] = [];
      let n = 0;
      while (seg.mouthQueue.length > 0 && n < step) {
        const part = seg.mouthQueue.shift()!;
        parts.push(part);
        n += part.length;
      }
      const pcm = parts.length === 1 ? parts[0]! : concatPcm(parts, n);
      seg.mouthQueued -= n;
      seg.mouthFed += n;
      seg.mouthChain = seg.mouthChain
        .then(async () => {
          if (!seg.done) seg.mouth.push(...(await stream.push(pcm)));
        })
        .catch(() => {});
    }
    if (seg.inputEnded && seg.mouthQueue.length === 0) {
      seg.mouthEnded = true;
      seg.mouthChain = seg.mouthChain
        .then(async () => {
          if (!seg.done) seg.mouth.push(...(await stream.end()));
        })
        .catch(() => {})
        .finally(() => (seg.mouthComplete = true));
    }
  }

  /**
   * Whether a segment not yet started is arriving faster than twice real time: a sender faster than
   * real time whose audio is still coming in. Started behind the queued silence the moment its start
   * buffer is in, such a reply would lose the chance to start in its place once the rest is here
   * (startSpeechNow): whether a burst beat the pump's next chunk decided its latency (80 or 180 ms).
   */
  private arrivingInABurst(seg: Segment): boolean {
    // Once it holds its start buffer and the queue, startSpeechNow has started it in place of the silence.
    if (seg.buffered >= this.startBuffer + this.sink.queueSamples) return false;
    const elapsedMs = this.now() - (seg.firstAt ?? this.now());
    return (seg.received * 1000) / this.sampleRate > 2 * elapsedMs;
  }

  /**
   * A segment that has arrived ahead of time starts now, in place of the silence queued in the sink
   * ahead of it: that silence (the sink's whole queue, 100 ms by default) would otherwise delay the
   * reply. Ahead of time: all of it is here, or enough to fill the sink and still hold its start
   * buffer (a sender faster than real time, as most TTS is). A sender streaming in real time keeps
   * the slack it had: its reply starts behind the queued silence, since filling the sink at once
   * would use up its start buffer and a chunk coming late would leave silence inside the reply.
   * Only silence is dropped: a segment still playing out is heard to its end first.
   */
  private startSpeechNow(): void {
    if (!this.running || this.restarting) return;
    const head = this.segments.find((s) => !s.done);
    if (!head || head.startAt !== null || head.buffered === 0) return;
    if (!head.inputEnded && head.buffered < this.startBuffer + this.sink.queueSamples) return;
    const position = this.position();
    if (this.spans.some((s) => s.segment !== null && s.start + s.length > position)) return;
    this.dropQueued(position);
  }

  /**
   * Drops what the sink holds beyond `position` (the chunk it is accepting included: the native
   * queue already holds it). What is accepted from then on plays from `position`.
   */
  private dropQueued(position: number): void {
    this.sink.clear();
    this.epochValue++;
    // A whole sample (the position is fractional): chunks are laid out from here, sample by sample.
    this.accepted = Math.ceil(Math.max(this.floor, position));
    this.lastDrop = this.accepted;
    this.floor = this.accepted;
    this.acceptedAt = this.now();
    this.anchors = [{ at: this.acceptedAt, position: this.accepted }];
    this.restarting = true;
    this.spans = this.spans.filter((s) => s.start < this.accepted);
    const last = this.spans[this.spans.length - 1];
    if (last && last.start + last.length > this.accepted) last.length = this.accepted - last.start;
    this.historyEnd = Math.min(this.historyEnd, this.accepted);
    this.o.onDropped?.(this.accepted);
  }

  private async runPump(): Promise<void> {
    while (this.running) {
      const epoch = this.epochValue;
      const pcm = this.nextChunk();
      try {
        await this.sink.capture(pcm);
      } catch {
        if (!this.running) break;
        // A sink that failed (the track went away): wait a chunk's time rather than spin.
        await new Promise<void>((r) => setTimeout(r, (this.chunkSamples * 1000) / this.sampleRate));
        continue;
      }
      // Dropped with the rest of the sink's queue while it waited: none of it plays.
      if (epoch !== this.epochValue) continue;
      const now = this.now();
      // Accepted once the queue is back to its size: a gap longer than the queue lasts means it ran dry.
      const gapMs = now - this.acceptedAt - (this.sink.queueSamples * 1000) / this.sampleRate;
      if (this.restarting) {
        // The first chunk after a drop: the sink was empty, so it plays from now.
        this.restarting = false;
        this.anchors = [{ at: now, position: this.accepted }];
      } else if (this.accepted > 0 && gapMs > 0) {
        this.health.underruns++;
        this.health.underrunMs += gapMs;
        // The sink played all it had and waited: what it was given last plays from now.
        this.anchors = [{ at: now, position: this.accepted }];
      }
      this.accepted += pcm.length;
      this.acceptedAt = now;
      // Once accepted, the queue is full: the sample playing is the queue's length behind the end.
      this.addAnchor(now, this.accepted - this.sink.queueSamples);
      this.settle(this.position());
    }
  }

  /** Keeps the anchors a sliding-window maximum of their extrapolation (position − at × rate). */
  private addAnchor(at: number, position: number): void {
    const key = (a: { at: number; position: number }) => a.position - (a.at * this.sampleRate) / 1000;
    const anchor = { at, position };
    while (this.anchors.length > 0 && key(this.anchors[this.anchors.length - 1]!) <= key(anchor)) this.anchors.pop();
    this.anchors.push(anchor);
    while (this.anchors.length > 1 && at - this.anchors[0]!.at > ANCHOR_WINDOW_MS) this.anchors.shift();
  }

  /** The next chunk: the head segment's audio once it may start, silence otherwise. */
  private nextChunk(): Int16Array {
    const out = new Int16Array(this.chunkSamples);
    let filled = 0;
    while (filled < this.chunkSamples) {
      const seg = this.segments.find((s) => !s.done && (s.startAt === null || s.endAt === null));
      const playable =
        seg &&
        !this.paused &&
        (seg.startAt !== null || seg.inputEnded || (seg.buffered >= this.startBuffer && !this.arrivingInABurst(seg)));
      if (!seg || !playable || seg.buffered === 0) {
        if (seg && seg.startAt !== null && seg.inputEnded && seg.buffered === 0 && seg.endAt === null) {
          seg.endAt = this.accepted + filled;
          continue;
        }
        if (seg && seg.startAt !== null && !seg.inputEnded && !this.paused)
          this.health.starvedMs += ((this.chunkSamples - filled) * 1000) / this.sampleRate;
        this.addSpan(this.accepted + filled, this.chunkSamples - filled, null, 0);
        break;
      }
      const head = seg.chunks[0];
      if (!head) {
        // Counted but not held (a fault of ours): counted out, rather than stop the pump of every
        // call of this worker.
        this.buffered -= seg.buffered;
        seg.buffered = 0;
        continue;
      }
      if (seg.startAt === null) seg.startAt = this.accepted + filled;
      const take = Math.min(head.length, this.chunkSamples - filled);
      out.set(head.subarray(0, take), filled);
      const offset = seg.received - seg.buffered;
      this.addSpan(this.accepted + filled, take, seg, offset);
      this.noteHanded(seg, offset, head.subarray(0, take));
      if (take === head.length) seg.chunks.shift();
      else seg.chunks[0] = head.subarray(take);
      seg.buffered -= take;
      this.buffered -= take;
      filled += take;
      this.feedMouth(seg);
      if (seg.buffered === 0 && seg.inputEnded) seg.endAt = this.accepted + filled;
    }
    this.recordLevels(this.accepted, out);
    this.keep(this.accepted, out);
    this.o.onPushed?.(this.accepted, out);
    return out;
  }

  /** Keeps the audio of `seg` handed to the sink for as long as the sink may hold it unplayed (and as much again). */
  private noteHanded(seg: Segment, offset: number, pcm: Int16Array): void {
    seg.handed.push({ offset, pcm });
    const keepFrom = offset + pcm.length - 2 * (this.sink.queueSamples + this.chunkSamples);
    while (seg.handed.length > 1 && seg.handed[0]!.offset + seg.handed[0]!.pcm.length <= keepFrom) seg.handed.shift();
  }

  /** Keeps a chunk handed to the sink at playout sample `at` for audioAt. */
  private keep(at: number, pcm: Int16Array): void {
    const h = this.history;
    if (!h) return;
    for (let k = 0; k < pcm.length; k++) h[(at + k) % h.length] = pcm[k]!;
    this.historyEnd = at + pcm.length;
  }

  private addSpan(start: number, length: number, segment: Segment | null, offset: number): void {
    const last = this.spans[this.spans.length - 1];
    if (
      last &&
      last.segment === segment &&
      last.start + last.length === start &&
      (segment === null || last.offset + last.length === offset)
    ) {
      last.length += length;
    } else {
      this.spans.push({ start, length, segment, offset });
    }
    // Keep about 10 s of history (frames are asked for around the playout position only).
    const horizon = start - this.sampleRate * 10;
    while (this.spans.length > 2 && this.spans[0]!.start + this.spans[0]!.length < horizon) this.spans.shift();
  }

  /**
   * spanAt, and past the audio in the sink, the playing segment's last span carried on over the
   * audio the segment has received and not yet handed over: the pump hands that audio over next,
   * sample after sample, so where it plays is settled already. A sender streaming in real time is
   * thus drawn for a start buffer's time (100 ms) sooner than the sink alone allows, which is the
   * slack that keeps speaking frames drawn in time on a busy worker.
   */
  private spanAhead(position: number): Span | undefined {
    const span = this.spanAt(position);
    if (span) return span;
    const last = this.spans[this.spans.length - 1];
    const seg = last?.segment;
    if (!last || !seg || seg.done || seg.endAt !== null) return undefined;
    return position >= last.start && position < last.start + last.length + seg.buffered ? last : undefined;
  }

  private spanAt(position: number): Span | undefined {
    for (let i = this.spans.length - 1; i >= 0; i--) {
      const s = this.spans[i]!;
      if (position >= s.start) return position < s.start + s.length ? s : undefined;
    }
    return undefined;
  }

  /** Reports segments whose first sample has played, and those played out. */
  private settle(position: number): void {
    for (const seg of this.segments) {
      if (seg.done) continue;
      if (!seg.startedSent && seg.startAt !== null && position >= seg.startAt) {
        seg.startedSent = true;
        this.o.onEvent({ type: 'started', segmentId: seg.id });
      }
      if (seg.endAt !== null && position >= seg.endAt) this.finish(seg, false, seg.received);
    }
  }

  private interruptAll(position = this.position()): void {
    for (const seg of [...this.segments]) if (!seg.done) this.finish(seg, true, this.playedSamples(seg, position));
  }

  /** Samples of `seg` played by `position`: those handed to the sink, less those still queued after it. */
  private playedSamples(seg: Segment, position: number): number {
    let unplayed = 0;
    for (const s of this.spans) {
      if (s.segment !== seg) continue;
      unplayed += Math.min(s.length, Math.max(0, s.start + s.length - position));
    }
    return Math.max(0, seg.received - seg.buffered - unplayed);
  }

  private finish(seg: Segment, interrupted: boolean, playedSamples = 0): void {
    if (seg.done) return;
    seg.done = true;
    seg.chunks = [];
    seg.handed = [];
    seg.mouthQueue = [];
    seg.mouthQueued = 0;
    if (!seg.mouthEnded) seg.mouthStream?.close?.();
    this.buffered -= seg.buffered;
    seg.buffered = 0;
    const i = this.segments.indexOf(seg);
    if (i >= 0) this.segments.splice(i, 1);
    // Keep the id known a while, so late data of an interrupted stream is ignored, not replayed.
    setTimeout(() => this.byId.delete(seg.id), 60_000).unref?.();
    this.o.onEvent({
      type: 'finished',
      segmentId: seg.id,
      positionSeconds: playedSamples / this.sampleRate,
      interrupted,
    });
  }

  /** Mean absolute amplitude of pushed audio per 10 ms bucket (absolute bucket index), about 10 s of it. */
  private readonly levels = new Map<number, number>();

  private recordLevels(start: number, pcm: Int16Array): void {
    const per = this.sampleRate / 100;
    for (let i = 0; i < pcm.length;) {
      const bucket = Math.floor((start + i) / per);
      const until = Math.min(pcm.length, (bucket + 1) * per - start);
      let sum = 0;
      for (let k = i; k < until; k++) sum += Math.abs(pcm[k]!);
      this.levels.set(bucket, sum / Math.max(1, until - i));
      i = until;
    }
    const horizon = Math.floor(start / per) - 1000;
    for (const k of this.levels.keys()) {
      if (k >= horizon) break;
      this.levels.delete(k);
    }
  }

  private levelAt(position: number): number {
    return this.levels.get(Math.floor(position / (this.sampleRate / 100))) ?? 0;
  }
}

function concatPcm(parts: readonly Int16Array[], length: number): Int16Array {
  const out = new Int16Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
