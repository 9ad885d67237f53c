/**
 * The streaming turn renderer: speech (audio with phone timings, sentence by sentence) in, the
 * turn-stream mux out (docs/mux-format.md), lip-synced on a body of frames (the avatar's idle loop)
 * that keeps playing where it is. The header goes out at once; then, per video frame, the audio up
 * to the end of that frame followed by the frame, so a client that waits for audio before showing a
 * frame never stalls. Every frame sits on the frame grid of the audio sample clock.
 *
 *   const turn = new TurnStream({ body, startFrame, lipsync, speech, sampleRate: 16000, describeError });
 *   for await (const chunk of turn.chunks()) socket.write(chunk.bytes);
 *   turn.stats; // frames drawn, audio samples, sentences with their place on the clock, outcome
 *
 * Pull-driven: nothing is rendered ahead of what the consumer asks for, and a consumer that stops
 * (return() on the iterator) stops the render and the speech source with it.
 */
import { AvatarMuxWriter, encodeJpeg, framePts } from '../encode/index.ts';
import type { LipSyncEngine, LipSyncFace, LipSyncItem } from '../lipsync/index.ts';
import { MEL_SAMPLE_RATE, melSpectrogram, melWindow, type MelSpectrogram } from '../lipsync/index.ts';
import { isNeutral, type MouthShape } from '../synth/index.ts';
import { mouthShape } from '../talking-head/index.ts';
import { Resampler, phonesToVisemes, visemeTrack, type MouthFrame, type TimedPhone } from '../visemes/index.ts';

/** The frames speech is drawn on: a frame cache opened for playback, with the lip-sync geometry per frame. */
export interface TurnBody {
  /** Whole frames per second (the mux's frame grid is fps/1). */
  fps: number;
  width: number;
  height: number;
  frameCount: number;
  /** Frame i as tightly packed RGBA (read only). */
  frame(i: number): Promise<Uint8Array>;
  /** Frame i's stored JPEG, sent as is where no mouth is drawn (silence); undefined when not stored as JPEG. */
  jpeg?(i: number): Uint8Array | undefined;
  /** The lip-sync engine's geometry of frame i. */
  face(i: number): LipSyncFace;
}

/** One sentence of speech, back to back with the previous one. */
export interface SpeechChunk {
  text: string;
  /** Mono s16 at `sampleRate`. */
  samples: Int16Array;
  sampleRate: number;
  /** Phones relative to the chunk's start, in seconds (the TTS's timings). */
  phones: readonly TimedPhone[];
}

export interface TurnError {
  code: string;
  message: string;
  retryable: boolean;
}

export interface TurnStreamOptions {
  body: TurnBody;
  /** The body frame shown at pts 0: frame k of the turn shows body frame (startFrame + k) mod frameCount. */
  startFrame: number;
  lipsync: LipSyncEngine;
  speech: AsyncIterable<SpeechChunk>;
  /** The speech's sample rate: the stream's clock, announced in the header before any speech exists. */
  sampleRate: number;
  /** The header's metadata object. */
  metadata?: Record<string, unknown>;
  /** Most audio samples the turn may carry; speech past it is cut (a `truncated` event says so). */
  maxSamples?: number;
  /** JPEG quality of drawn frames (default 80). */
  jpegQuality?: number;
  /** The ERROR record for a failure of the speech source or of the render. */
  describeError(err: unknown): TurnError;
}

/** Bytes to send, with the audio and frames they carry (for billing what was delivered). */
export interface TurnChunk {
  bytes: Uint8Array;
  audioSamples: number;
  videoFrames: number;
  /** The last chunk: the END or ERROR record (and events), no media. */
  final?: boolean;
}

interface TurnSentence {
  text: string;
  /** Its first and one-past-last sample on the turn's clock. */
  startSample: number;
  endSample: number;
}

export interface TurnStats {
  /** `open` while running; then how the stream ended (`stopped`: the consumer left before the end). */
  outcome: 'open' | 'end' | 'truncated' | 'error' | 'stopped';
  error?: unknown;
  /** Audio samples and video frames written to the stream. */
  audioSamples: number;
  frames: number;
  /** Frames whose mouth went through the lip-sync engine (the others were stored frames sent as is). */
  drawnFrames: number;
  sentences: TurnSentence[];
}

interface Spoken {
  track: MouthFrame[];
  mel: MelSpectrogram | null;
  start: number;
  end: number;
}

/**
 * A mouth this close to rest looks like the stored frame (the smoothing leaves a trace of a few
 * thousandths around speech): the stored frame is sent as is.
 */
const REST = 0.02;
const atRest = (m: MouthShape): boolean => isNeutral(m, REST);

/** Frames rendered per engine call: 1 first (the first frame as early as possible), then up to this many. */
const MAX_BATCH = 4;

export class TurnStream {
  readonly stats: TurnStats = { outcome: 'open', audioSamples: 0, frames: 0, drawnFrames: 0, sentences: [] };
  private readonly mux: AvatarMuxWriter;
  private readonly fps: number;
  private readonly rate: number;
  /** Speech not yet written, from sample `pendingFrom` of the turn's clock. */
  private pending: Int16Array[] = [];
  private pendingFrom = 0;
  /** Samples of speech received (the end of the available audio). */
  private received = 0;
  private nextFrame = 0;
  private batch = 1;
  /** The last two sentences' mouth tracks (frame k of a track is frame k of the turn). */
  private spoken: Spoken[] = [];

  constructor(private readonly o: TurnStreamOptions) {
    const { body } = o;
    if (!Number.isInteger(body.fps) || body.fps <= 0)
      throw new RangeError(`turn: the body's fps must be a whole number, got ${body.fps}`);
    if (!(body.frameCount > 0)) throw new RangeError('turn: the body has no frames');
    this.fps = body.fps;
    this.rate = o.sampleRate;
    this.mux = new AvatarMuxWriter({
      tracks: [
        { kind: 'audio', sampleRate: o.sampleRate, channels: 1 },
        { kind: 'video', codec: 'jpeg', width: body.width, height: body.height, fps: body.fps },
      ],
      ...(o.metadata ? { metadata: o.metadata } : {}),
    });
  }

  /** The stream, chunk by chunk: the header first, END or ERROR last. */
  async *chunks(): AsyncGenerator<TurnChunk, void, undefined> {
    yield { bytes: this.mux.start(), audioSamples: 0, videoFrames: 0 };
    const events: Uint8Array[] = [];
    let stopped = true;
    try {
      let truncated = false;
      for await (const chunk of this.o.speech) {
        if (chunk.sampleRate !== this.rate)
          throw new Error(`turn: speech at ${chunk.sampleRate} Hz on a ${this.rate} Hz stream`);
        let samples = chunk.samples;
        const room = (this.o.maxSamples ?? Number.POSITIVE_INFINITY) - this.received;
        if (samples.length >= room) {
          samples = samples.subarray(0, Math.max(0, room));
          truncated = true;
        }
        if (samples.length > 0) yield* this.speak(chunk, samples, events);
        if (truncated) break;
      }
      // The last frame(s): those that start before the end of the audio.
      yield* this.flushFrames(this.received, true, events);
      const tail = this.takeAudio(this.received);
      if (tail.samples > 0) yield { bytes: concat(tail.records), audioSamples: tail.samples, videoFrames: 0 };
      if (truncated) events.push(this.mux.event('truncated', { reason: 'max_duration' }, { pts: this.received }));
      events.push(this.mux.end());
      this.stats.outcome = truncated ? 'truncated' : 'end';
      stopped = false;
      yield { bytes: concat(events.splice(0)), audioSamples: 0, videoFrames: 0, final: true };
    } catch (err) {
      stopped = false;
      this.stats.outcome = 'error';
      this.stats.error = err;
      // What was sent stays valid; audio without its frames is not sent after a failure.
      const e = this.o.describeError(err);
      yield {
        bytes: concat([...events.splice(0), this.mux.error(e.code, e.message, { retryable: e.retryable })]),
        audioSamples: 0,
        videoFrames: 0,
        final: true,
      };
    } finally {
      if (stopped && this.stats.outcome === 'open') this.stats.outcome = 'stopped';
    }
  }

  /** One sentence: its events, then every frame that starts inside it. */
  private async *speak(chunk: SpeechChunk, samples: Int16Array, events: Uint8Array[]): AsyncGenerator<TurnChunk> {
    const start = this.received;
    const end = start + samples.length;
    this.pending.push(samples);
    this.received = end;
    this.stats.sentences.push({ text: chunk.text, startSample: start, endSample: end });
    events.push(this.mux.event('speech_start', { text: chunk.text }, { pts: start, durationSamples: samples.length }));
    for (const v of phonesToVisemes(chunk.phones)) {
      const at = start + Math.round(v.start * this.rate);
      if (at >= end || v.viseme === 'sil') continue;
      const until = Math.min(end, start + Math.round(v.end * this.rate));
      events.push(
        this.mux.event('viseme', { viseme: v.viseme, phone: v.phone }, { pts: at, durationSamples: until - at }),
      );
    }
    events.push(this.mux.event('speech_end', undefined, { pts: end }));

    // The mouth of each frame of this sentence, from the sentence's phones placed on the turn's clock
    // (after a pause from 0: the curves' smoothing then starts from a closed mouth, as speech does).
    const offset = start / this.rate;
    const phones: TimedPhone[] = offset > 0 ? [{ phone: 'pau', start: 0, end: offset }] : [];
    for (const p of chunk.phones) phones.push({ phone: p.phone, start: p.start + offset, end: p.end + offset });
    const track = visemeTrack(phones, this.fps, { durationSeconds: end / this.rate });
    const mel = this.o.lipsync.needsAudio ? this.melOf(samples) : null;
    // The frame that spans the end of this sentence waits for the next one (or the end of speech),
    // so its audio is complete when it goes out: it is drawn with this sentence's mouth.
    this.spoken = [...this.spoken.slice(-1), { track: track.frames, mel, start, end }];
    yield* this.flushFrames(end, false, events);
  }

  /** The sentence frame k starts in, if any. */
  private speechAt(k: number): Spoken | undefined {
    const at = this.pts(k);
    return this.spoken.find((s) => at >= s.start && at < s.end);
  }

  /**
   * Draws and writes every frame whose audio ends by `until` on the clock, or, at the end of the
   * speech (`last`), every frame that starts before it.
   */
  private async *flushFrames(until: number, last: boolean, events: Uint8Array[]): AsyncGenerator<TurnChunk> {
    const ready = (k: number) => (last ? this.pts(k) < until : this.pts(k + 1) <= until);
    let planned = this.nextFrame;
    const plan = (): { ks: number[]; jpegs: Promise<Uint8Array[]> } | null => {
      const ks: number[] = [];
      while (ks.length < this.batch && ready(planned)) ks.push(planned++);
      if (ks.length === 0) return null;
      this.batch = Math.min(MAX_BATCH, this.batch * 2);
      const jpegs = this.renderFrames(ks);
      jpegs.catch(() => undefined); // awaited below; a consumer that left no longer does
      return { ks, jpegs };
    };
    // Two batches in flight: the next one decodes and draws while this one encodes and goes out.
    let current = plan();
    while (current) {
      const jpegs = await current.jpegs;
      const { ks } = current;
      current = plan();
      for (let j = 0; j < ks.length; j++) {
        const k = ks[j]!;
        // The audio up to the end of this frame (as much of it as exists), then the frame.
        const audio = this.takeAudio(Math.min(this.pts(k + 1), this.received));
        const video = this.mux.video(jpegs[j]!, { frame: k });
        this.stats.frames++;
        this.nextFrame = k + 1;
        yield {
          bytes: concat([...events.splice(0), ...audio.records, video]),
          audioSamples: audio.samples,
          videoFrames: 1,
        };
      }
    }
  }

  private async renderFrames(ks: number[]): Promise<Uint8Array[]> {
    const { body, lipsync } = this.o;
    const out: (Uint8Array | undefined)[] = new Array(ks.length);
    const draw: { at: number; index: number; item: Omit<LipSyncItem, 'frame'> }[] = [];
    ks.forEach((k, j) => {
      const index = (((this.o.startFrame + k) % body.frameCount) + body.frameCount) % body.frameCount;
      const speech = this.speechAt(k);
      const mouth = speech?.track[k];
      const shape = mouth ? mouthShape(mouth) : { open: 0, wide: 0, round: 0 };
      const silent = !lipsync.needsAudio ? atRest(shape) : !mouth;
      const stored = silent ? body.jpeg?.(index) : undefined;
      if (stored) {
        out[j] = stored;
        return;
      }
      const item: Omit<LipSyncItem, 'frame'> = { face: body.face(index), shape };
      if (lipsync.needsAudio) {
        const local = speech ? Math.max(0, Math.round(((this.pts(k) - speech.start) * this.fps) / this.rate)) : 0;
        item.mel = melWindow(speech?.mel ?? { data: new Float32Array(0), frames: 0 }, local, this.fps);
      }
      draw.push({ at: j, index, item });
    });
    if (draw.length > 0) {
      const frames = await Promise.all(draw.map((d) => body.frame(d.index)));
      const drawn = await lipsync.renderFrames(
        draw.map((d, i) => ({ ...d.item, frame: { width: body.width, height: body.height, data: frames[i]! } })),
      );
      const jpegs = await Promise.all(
        drawn.map((rgba) =>
          encodeJpeg(rgba as Uint8Array, body.width, body.height, { quality: this.o.jpegQuality ?? 80 }),
        ),
      );
      draw.forEach((d, i) => (out[d.at] = jpegs[i]!));
      this.stats.drawnFrames += draw.length;
    }
    return out as Uint8Array[];
  }

  /** The audio records for the speech up to sample `upTo` not written yet. */
  private takeAudio(upTo: number): { records: Uint8Array[]; samples: number } {
    const records: Uint8Array[] = [];
    let taken = 0;
    while (this.pendingFrom < upTo && this.pending.length > 0) {
      const head = this.pending[0]!;
      const n = Math.min(head.length, upTo - this.pendingFrom);
      records.push(this.mux.audio(head.subarray(0, n)));
      taken += n;
      this.pendingFrom += n;
      if (n === head.length) this.pending.shift();
      else this.pending[0] = head.subarray(n);
    }
    this.stats.audioSamples += taken;
    return { records, samples: taken };
  }

  private pts(k: number): number {
    return framePts(k, this.rate, this.fps, 1);
  }

  /** The mel spectrogram of one sentence, at the neural model's 16 kHz. */
  private melOf(samples: Int16Array): MelSpectrogram {
    const f = new Float32Array(samples.length);
    for (let i = 0; i < samples.length; i++) f[i] = samples[i]! / 32768;
    return melSpectrogram(this.rate === MEL_SAMPLE_RATE ? f : new Resampler(this.rate).push(f, true));
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
