/**
 * Writer of the turn-stream mux ("AVMX", docs/mux-format.md): the body of POST /realtime/turn.
 *
 * Pure and synchronous: every method returns the bytes to send next, so the same writer serves a
 * Node response, a Hono stream or a web ReadableStream. The format's constants (and the reader,
 * `readAvatarMux`) live in the client package, so server and client cannot disagree.
 */
import {
  AUDIO_PREFIX_SIZE,
  AudioCodecId,
  EVENT_PREFIX_SIZE,
  MUX_MAGIC,
  MUX_VERSION_MAJOR,
  MUX_VERSION_MINOR,
  PREAMBLE_SIZE,
  RECORD_HEADER_SIZE,
  RecordFlag,
  RecordType,
  TRACK_DESCRIPTOR_SIZE,
  TrackKind,
  VIDEO_PREFIX_SIZE,
  VideoCodecId,
  crc32,
  i420Size,
  writeU64,
} from '../../client/format.ts';
import type { KnownAudioCodec, KnownVideoCodec } from '../../client/format.ts';

interface MuxAudioTrackSpec {
  kind: 'audio';
  /** Default pcm_s16le. `opus`: one Opus packet per audio record (pass `sampleCount`). */
  codec?: KnownAudioCodec;
  /** Must equal the stream's clock rate (version 1 has one clock: the audio's). */
  sampleRate: number;
  /** Default 1. */
  channels?: number;
}

interface MuxVideoTrackSpec {
  kind: 'video';
  codec: KnownVideoCodec;
  width: number;
  height: number;
  /** Frames per second: a number (25) or an exact ratio ({ num: 30000, den: 1001 }). */
  fps: number | { num: number; den: number };
}

export type MuxTrackSpec = MuxAudioTrackSpec | MuxVideoTrackSpec;

export interface MuxWriterOptions {
  tracks: MuxTrackSpec[];
  /** Timeline ticks per second. Defaults to the first audio track's sample rate (required without audio). */
  clockRate?: number;
  /** JSON object put in the header (turn id, avatar id, voice...). */
  metadata?: Record<string, unknown>;
}

interface TrackState {
  spec: MuxTrackSpec;
  codecId: number;
  channels: number;
  fpsNum: number;
  fpsDen: number;
  /** Audio: samples written (per channel). Video: frames written. */
  count: number;
  bytes: number;
  /** Video: last pts (-1 before the first frame), and the grid slot of the last frame. */
  lastPts: number;
  lastSlot: number;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const encoder = new TextEncoder();

/** pts of frame slot `index` on a `clockRate` clock at fpsNum/fpsDen: exact, so it never drifts. */
export function framePts(index: number, clockRate: number, fpsNum: number, fpsDen: number): number {
  return Math.round((index * clockRate * fpsDen) / fpsNum);
}

function fpsRatio(fps: MuxVideoTrackSpec['fps']): { num: number; den: number } {
  if (typeof fps === 'object') return fps;
  if (Number.isInteger(fps)) return { num: fps, den: 1 };
  // 29.97 and friends: the NTSC ratios, else millisecond precision.
  for (const base of [24, 30, 60, 120]) {
    if (Math.abs(fps - (base * 1000) / 1001) < 1e-3) return { num: base * 1000, den: 1001 };
  }
  return { num: Math.round(fps * 1000), den: 1000 };
}

export class AvatarMuxWriter {
  readonly clockRate: number;
  private readonly tracks: TrackState[];
  private readonly metadata: Record<string, unknown>;
  private state: 'new' | 'open' | 'closed' = 'new';
  private events = 0;

  constructor(options: MuxWriterOptions) {
    if (options.tracks.length === 0) throw new Error('mux: at least one track is needed');
    if (options.tracks.length > 0xffff) throw new Error('mux: too many tracks');
    const firstAudio = options.tracks.find((t): t is MuxAudioTrackSpec => t.kind === 'audio');
    const clockRate = options.clockRate ?? firstAudio?.sampleRate;
    if (clockRate === undefined) throw new Error('mux: clockRate is required when there is no audio track');
    if (!Number.isInteger(clockRate) || clockRate <= 0 || clockRate > 0xffffffff) {
      throw new Error(`mux: invalid clock rate ${clockRate}`);
    }
    this.clockRate = clockRate;
    this.metadata = options.metadata ?? {};
    this.tracks = options.tracks.map((spec, id) => {
      if (spec.kind === 'audio') {
        const channels = spec.channels ?? 1;
        if (spec.sampleRate !== clockRate) {
          throw new Error(
            `mux: audio track ${id} at ${spec.sampleRate} Hz; version 1 needs the clock rate ${clockRate}`,
          );
        }
        if (!Number.isInteger(channels) || channels < 1 || channels > 0xffff) {
          throw new Error(`mux: audio track ${id} has ${channels} channels`);
        }
        return {
          spec,
          codecId: AudioCodecId[spec.codec ?? 'pcm_s16le'],
          channels,
          fpsNum: 0,
          fpsDen: 0,
          count: 0,
          bytes: 0,
          lastPts: -1,
          lastSlot: -1,
        };
      }
      const { num, den } = fpsRatio(spec.fps);
      const dims = [spec.width, spec.height];
      if (dims.some((d) => !Number.isInteger(d) || d < 1 || d > 0xffff)) {
        throw new Error(`mux: video track ${id} is ${spec.width}x${spec.height}`);
      }
      if (!(num > 0 && den > 0 && Number.isInteger(num) && Number.isInteger(den))) {
        throw new Error(`mux: video track ${id} has frame rate ${num}/${den}`);
      }
      return {
        spec,
        codecId: VideoCodecId[spec.codec],
        channels: 0,
        fpsNum: num,
        fpsDen: den,
        count: 0,
        bytes: 0,
        lastPts: -1,
        lastSlot: -1,
      };
    });
  }

  /** Samples written so far on audio track `track` (the current position of the audio clock). */
  audioPosition(track = this.firstTrack('audio')): number {
    return this.trackOf(track, 'audio').count;
  }

  /** pts the next `video()` on `track` gets by default: the next slot of the frame grid. */
  nextVideoPts(track = this.firstTrack('video')): number {
    const t = this.trackOf(track, 'video');
    return framePts(t.lastSlot + 1, this.clockRate, t.fpsNum, t.fpsDen);
  }

  /** The preamble and header record: the first bytes of the stream. */
  start(): Uint8Array {
    if (this.state !== 'new') throw new Error('mux: start() was already called');
    this.state = 'open';
    const meta = encoder.encode(JSON.stringify(this.metadata));
    const n = this.tracks.length;
    const payload = new Uint8Array(8 + n * TRACK_DESCRIPTOR_SIZE + 4 + meta.length);
    const v = new DataView(payload.buffer);
    v.setUint32(0, this.clockRate, true);
    v.setUint16(4, n, true);
    v.setUint16(6, TRACK_DESCRIPTOR_SIZE, true);
    this.tracks.forEach((t, id) => {
      const o = 8 + id * TRACK_DESCRIPTOR_SIZE;
      payload[o + 1] = t.codecId;
      if (t.spec.kind === 'audio') {
        payload[o] = TrackKind.AUDIO;
        v.setUint32(o + 4, t.spec.sampleRate, true);
        v.setUint16(o + 8, t.channels, true);
      } else {
        payload[o] = TrackKind.VIDEO;
        v.setUint16(o + 12, t.spec.width, true);
        v.setUint16(o + 14, t.spec.height, true);
        v.setUint32(o + 16, t.fpsNum, true);
        v.setUint32(o + 20, t.fpsDen, true);
      }
    });
    const metaAt = 8 + n * TRACK_DESCRIPTOR_SIZE;
    v.setUint32(metaAt, meta.length, true);
    payload.set(meta, metaAt + 4);

    const pre = new Uint8Array(PREAMBLE_SIZE);
    pre.set(MUX_MAGIC, 0);
    const pv = new DataView(pre.buffer);
    pv.setUint16(4, MUX_VERSION_MAJOR, true);
    pv.setUint16(6, MUX_VERSION_MINOR, true);
    const rec = record(RecordType.HEADER, 0, 0, payload.length, (out, at) => out.set(payload, at));
    const out = new Uint8Array(pre.length + rec.length);
    out.set(pre, 0);
    out.set(rec, pre.length);
    return out;
  }

  /**
   * An audio chunk, contiguous with the previous one. pcm_s16le: interleaved samples (an Int16Array,
   * or its s16le bytes). opus: one packet as bytes, with its `sampleCount` (at the clock rate).
   */
  audio(samples: Int16Array | Uint8Array, options: { track?: number; sampleCount?: number } = {}): Uint8Array {
    this.mustBeOpen();
    const id = options.track ?? this.firstTrack('audio');
    const t = this.trackOf(id, 'audio');
    const spec = t.spec as MuxAudioTrackSpec;
    let bytes: Uint8Array;
    let sampleCount: number;
    if ((spec.codec ?? 'pcm_s16le') === 'pcm_s16le') {
      bytes = samples instanceof Int16Array ? s16leBytes(samples) : samples;
      const frame = 2 * t.channels;
      if (bytes.length % frame !== 0) {
        throw new Error(
          `mux: ${bytes.length} bytes of pcm_s16le is not a whole number of ${t.channels}-channel samples`,
        );
      }
      sampleCount = bytes.length / frame;
      if (options.sampleCount !== undefined && options.sampleCount !== sampleCount) {
        throw new Error(`mux: sampleCount ${options.sampleCount} disagrees with the ${sampleCount} samples given`);
      }
    } else {
      if (!(samples instanceof Uint8Array)) throw new Error('mux: opus audio is passed as packet bytes');
      if (options.sampleCount === undefined) throw new Error('mux: opus audio needs its sampleCount');
      bytes = samples;
      sampleCount = options.sampleCount;
    }
    if (!Number.isInteger(sampleCount) || sampleCount < 0 || sampleCount > 0xffffffff) {
      throw new Error(`mux: invalid sample count ${sampleCount}`);
    }
    const pts = t.count;
    const rec = record(RecordType.AUDIO, 0, id, AUDIO_PREFIX_SIZE + bytes.length, (out, at, v) => {
      writeU64(v, at, pts);
      v.setUint32(at + 8, sampleCount, true);
      out.set(bytes, at + AUDIO_PREFIX_SIZE);
    });
    t.count += sampleCount;
    t.bytes += bytes.length;
    return rec;
  }

  /**
   * A video frame: a complete JPEG (jpeg tracks) or Y, U, V planes (i420 tracks). Its pts is the
   * next slot of the frame grid on the audio clock, or the slot `frame` (frames were skipped), or
   * an explicit `pts` in samples. pts must increase.
   */
  video(data: Uint8Array, options: { track?: number; frame?: number; pts?: number } = {}): Uint8Array {
    this.mustBeOpen();
    const id = options.track ?? this.firstTrack('video');
    const t = this.trackOf(id, 'video');
    const spec = t.spec as MuxVideoTrackSpec;
    if (spec.codec === 'i420') {
      const want = i420Size(spec.width, spec.height);
      if (data.length !== want)
        throw new Error(`mux: i420 frame of ${data.length} bytes, expected ${want} for ${spec.width}x${spec.height}`);
    } else if (data.length < 4 || data[0] !== 0xff || data[1] !== 0xd8) {
      throw new Error('mux: a jpeg track takes JPEG bytes (starting FF D8)');
    }
    let slot: number;
    let pts: number;
    if (options.pts !== undefined) {
      pts = options.pts;
      slot = Math.round((pts * t.fpsNum) / (this.clockRate * t.fpsDen));
    } else {
      slot = options.frame ?? t.lastSlot + 1;
      pts = framePts(slot, this.clockRate, t.fpsNum, t.fpsDen);
    }
    if (!Number.isSafeInteger(pts) || pts <= t.lastPts) {
      throw new Error(`mux: video pts ${pts} does not increase (previous ${t.lastPts})`);
    }
    const rec = record(RecordType.VIDEO, RecordFlag.KEYFRAME, id, VIDEO_PREFIX_SIZE + data.length, (out, at, v) => {
      writeU64(v, at, pts);
      out.set(data, at + VIDEO_PREFIX_SIZE);
    });
    t.lastPts = pts;
    t.lastSlot = Math.max(slot, t.lastSlot + 1);
    t.count += 1;
    t.bytes += data.length;
    return rec;
  }

  /**
   * A timed event (speech_start, speech_end, viseme, word, mark...). `pts` defaults to the current
   * audio position; `data` is any JSON value.
   */
  event(name: string, data?: unknown, options: { pts?: number; durationSamples?: number } = {}): Uint8Array {
    this.mustBeOpen();
    const nameBytes = encoder.encode(name);
    if (nameBytes.length < 1 || nameBytes.length > 255) throw new Error('mux: event names are 1 to 255 bytes of UTF-8');
    const json = data === undefined ? new Uint8Array(0) : encoder.encode(JSON.stringify(data));
    const pts = options.pts ?? this.defaultEventPts();
    const duration = options.durationSamples ?? 0;
    if (!Number.isSafeInteger(pts) || pts < 0) throw new Error(`mux: invalid event pts ${pts}`);
    if (!Number.isInteger(duration) || duration < 0 || duration > 0xffffffff)
      throw new Error(`mux: invalid event duration ${duration}`);
    const rec = record(RecordType.EVENT, 0, 0, EVENT_PREFIX_SIZE + nameBytes.length + json.length, (out, at, v) => {
      writeU64(v, at, pts);
      v.setUint32(at + 8, duration, true);
      out[at + 12] = nameBytes.length;
      out.set(nameBytes, at + EVENT_PREFIX_SIZE);
      out.set(json, at + EVENT_PREFIX_SIZE + nameBytes.length);
    });
    this.events += 1;
    return rec;
  }

  /**
   * The end record with the stream's totals; nothing may follow. `durationSamples` defaults to the
   * end of the audio, or of the last frame when video runs longer.
   */
  end(options: { durationSamples?: number } = {}): Uint8Array {
    this.mustBeOpen();
    let duration = 0;
    for (const t of this.tracks) {
      if (t.spec.kind === 'audio') duration = Math.max(duration, t.count);
      else if (t.lastPts >= 0) {
        const frameEnd = t.lastPts + Math.max(1, Math.round((this.clockRate * t.fpsDen) / t.fpsNum));
        duration = Math.max(duration, this.hasAudio() ? t.lastPts : frameEnd);
      }
    }
    const durationSamples = Math.max(duration, options.durationSamples ?? 0);
    const n = this.tracks.length;
    const rec = record(RecordType.END, 0, 0, 16 + 16 * n, (_out, at, v) => {
      writeU64(v, at, durationSamples);
      v.setUint32(at + 8, this.events, true);
      v.setUint16(at + 12, n, true);
      this.tracks.forEach((t, i) => {
        writeU64(v, at + 16 + 16 * i, t.count);
        writeU64(v, at + 24 + 16 * i, t.bytes);
      });
    });
    this.state = 'closed';
    return rec;
  }

  /**
   * A mid-stream failure: terminal, like end(). Before start() it returns the header too, so a
   * client still reads a well-formed stream.
   */
  error(
    code: string,
    message: string,
    options: { retryable?: boolean; details?: Record<string, unknown> } = {},
  ): Uint8Array {
    if (this.state === 'closed') throw new Error('mux: the stream is already closed');
    const head = this.state === 'new' ? this.start() : new Uint8Array(0);
    const rec = errorRecord(code, message, options);
    this.state = 'closed';
    if (head.length === 0) return rec;
    const out = new Uint8Array(head.length + rec.length);
    out.set(head, 0);
    out.set(rec, head.length);
    return out;
  }

  private defaultEventPts(): number {
    const a = this.tracks.find((t) => t.spec.kind === 'audio');
    if (a) return a.count;
    const v = this.tracks.find((t) => t.spec.kind === 'video');
    return v && v.lastPts >= 0 ? v.lastPts : 0;
  }

  private hasAudio(): boolean {
    return this.tracks.some((t) => t.spec.kind === 'audio');
  }

  private mustBeOpen(): void {
    if (this.state === 'new') throw new Error('mux: call start() first');
    if (this.state === 'closed') throw new Error('mux: the stream is already closed');
  }

  private firstTrack(kind: 'audio' | 'video'): number {
    const i = this.tracks.findIndex((t) => t.spec.kind === kind);
    if (i < 0) throw new Error(`mux: the stream has no ${kind} track`);
    return i;
  }

  private trackOf(id: number, kind: 'audio' | 'video'): TrackState {
    const t = this.tracks[id];
    if (!t || t.spec.kind !== kind) throw new Error(`mux: track ${id} is not a ${kind} track`);
    return t;
  }
}

/**
 * An ERROR record on its own, for whoever ends a stream past its writer: the writer stopped where
 * the stream was cut, or its END record never left (AvatarMuxWriter.error for the writer itself).
 */
export function errorRecord(
  code: string,
  message: string,
  options: { retryable?: boolean; details?: Record<string, unknown> } = {},
): Uint8Array {
  const json = encoder.encode(
    JSON.stringify({ ...options.details, code, message, retryable: options.retryable ?? false }),
  );
  return record(RecordType.ERROR, 0, 0, json.length, (out, at) => out.set(json, at));
}

/** One record: header (type, flags, track, length, CRC-32 of header bytes 0-7 and payload) and payload. */
function record(
  type: number,
  flags: number,
  track: number,
  length: number,
  fill: (out: Uint8Array, at: number, view: DataView) => void,
): Uint8Array {
  if (length > 0xffffffff) throw new Error('mux: record too large');
  const out = new Uint8Array(RECORD_HEADER_SIZE + length);
  const v = new DataView(out.buffer);
  out[0] = type;
  out[1] = flags;
  v.setUint16(2, track, true);
  v.setUint32(4, length, true);
  fill(out, RECORD_HEADER_SIZE, v);
  const crc = crc32(out.subarray(RECORD_HEADER_SIZE), crc32(out.subarray(0, 8)));
  v.setUint32(8, crc, true);
  return out;
}

function s16leBytes(samples: Int16Array): Uint8Array {
  if (LITTLE_ENDIAN) return new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);
  const out = new Uint8Array(samples.length * 2);
  const v = new DataView(out.buffer);
  for (let i = 0; i < samples.length; i++) v.setInt16(2 * i, samples[i]!, true);
  return out;
}
