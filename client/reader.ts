import {
  AUDIO_PREFIX_SIZE,
  EVENT_PREFIX_SIZE,
  MUX_MAGIC,
  MUX_VERSION_MAJOR,
  PREAMBLE_SIZE,
  RECORD_HEADER_SIZE,
  RecordFlag,
  RecordType,
  TRACK_DESCRIPTOR_SIZE,
  TrackKind,
  VIDEO_PREFIX_SIZE,
  audioCodecName,
  crc32,
  i420Size,
  readU64,
  videoCodecName,
} from './format.ts';
import type {
  AudioTrack,
  AvatarMuxRecord,
  MuxAudioChunk,
  MuxEnd,
  MuxErrorRecord,
  MuxEvent,
  MuxHeader,
  MuxTrack,
  MuxVideoFrame,
  VideoTrack,
} from './types.ts';

export type AvatarMuxErrorCode =
  /** The stream does not start with "AVMX". */
  | 'bad_magic'
  /** The stream's major version is not one this reader understands. */
  | 'unsupported_version'
  /** The bytes ended before the end (or error) record. */
  | 'truncated'
  /** A record's CRC-32 does not match its bytes. */
  | 'checksum_mismatch'
  /** A record claims more bytes than `maxRecordBytes`. */
  | 'record_too_large'
  /** The bytes are well framed but break a rule of the format. */
  | 'malformed';

/** A corrupt, truncated or unsupported stream. `offset` is the stream byte offset where the problem was found. */
export class AvatarMuxError extends Error {
  override name = 'AvatarMuxError';
  constructor(
    readonly code: AvatarMuxErrorCode,
    message: string,
    readonly offset: number,
  ) {
    super(`${message} (at byte ${offset})`);
  }
}

export interface ReadAvatarMuxOptions {
  /** Largest record payload accepted, in bytes; a larger length is reported as corrupt. Default 64 MiB. */
  maxRecordBytes?: number;
  /** Check each record's CRC-32 (default true). */
  verifyChecksums?: boolean;
}

export type AvatarMuxSource = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

const DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

interface Pull {
  next(): Promise<Uint8Array | null>;
  /** Releases the source; cancels it when it was not read to its end. */
  close(): Promise<void>;
}

function pullFrom(source: AvatarMuxSource): Pull {
  let done = false;
  const check = (value: unknown): Uint8Array => {
    if (!(value instanceof Uint8Array)) throw new TypeError('readAvatarMux: the stream must yield Uint8Array chunks');
    return value;
  };
  if (typeof (source as ReadableStream<Uint8Array>).getReader === 'function') {
    // getReader rather than async iteration: Safari's ReadableStream is not async-iterable.
    const reader = (source as ReadableStream<Uint8Array>).getReader();
    return {
      async next() {
        const r = await reader.read();
        if (r.done) {
          done = true;
          return null;
        }
        return check(r.value);
      },
      async close() {
        try {
          if (!done) await reader.cancel();
        } catch {
          // The source already failed; nothing to release.
        } finally {
          reader.releaseLock();
        }
      },
    };
  }
  const it = (source as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
  return {
    async next() {
      const r = await it.next();
      if (r.done) {
        done = true;
        return null;
      }
      return check(r.value);
    },
    async close() {
      if (!done && it.return) {
        try {
          await it.return();
        } catch {
          // Ignore: we are giving the source up.
        }
      }
    },
  };
}

/** The unread bytes, as a list of chunks; copies only when a read spans chunks or is handed out. */
class ByteQueue {
  private chunks: Uint8Array[] = [];
  private head = 0;
  available = 0;
  /** Stream offset of the next unread byte. */
  offset = 0;
  ended = false;

  constructor(private readonly pull: Pull) {}

  /** Waits until `n` bytes are buffered; false when the source ended first. */
  async ensure(n: number): Promise<boolean> {
    while (this.available < n) {
      if (this.ended) return false;
      const chunk = await this.pull.next();
      if (chunk === null) {
        this.ended = true;
        return false;
      }
      if (chunk.length > 0) {
        this.chunks.push(chunk);
        this.available += chunk.length;
      }
    }
    return true;
  }

  /** Takes `n` buffered bytes into a new array (offset 0, so typed views of it are aligned). */
  read(n: number): Uint8Array {
    const out = new Uint8Array(n);
    let o = 0;
    while (o < n) {
      const c = this.chunks[0]!;
      const take = Math.min(n - o, c.length - this.head);
      out.set(c.subarray(this.head, this.head + take), o);
      o += take;
      this.head += take;
      if (this.head === c.length) {
        this.chunks.shift();
        this.head = 0;
      }
    }
    this.available -= n;
    this.offset += n;
    return out;
  }
}

interface TrackState {
  /** Audio: next expected pts. Video: last pts (-1 before the first frame). */
  cursor: number;
  count: number;
  bytes: number;
}

const textDecoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Decodes an avatar turn stream (docs/mux-format.md) as it arrives: the header first, then audio
 * chunks, video frames and events as soon as each record is complete, then `end` (or `error`, when
 * the server failed mid-stream). Bytes may be split anywhere between chunks.
 *
 * Throws `AvatarMuxError` on a corrupt, truncated or unsupported stream. Leaving the loop early
 * (break, return, throw) cancels the source.
 *
 * Runs in browsers and Node alike (only Uint8Array, DataView and TextDecoder).
 *
 * ```ts
 * const res = await fetch(`${base}/api/v1/realtime/turn`, { method: 'POST', headers, body });
 * for await (const rec of readAvatarMux(res.body!)) {
 *   if (rec.type === 'audio') player.queueAudio(rec.pcm!, rec.time);
 *   else if (rec.type === 'video') player.queueFrame(rec.data, rec.time);
 * }
 * ```
 */
export async function* readAvatarMux(
  source: AvatarMuxSource,
  options: ReadAvatarMuxOptions = {},
): AsyncGenerator<AvatarMuxRecord, void, undefined> {
  const maxRecordBytes = options.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
  const verify = options.verifyChecksums ?? true;
  const pull = pullFrom(source);
  const q = new ByteQueue(pull);
  try {
    if (!(await q.ensure(PREAMBLE_SIZE))) {
      throw new AvatarMuxError(
        'truncated',
        q.available === 0 ? 'empty stream: no avatar mux header' : 'stream ended inside the preamble',
        q.offset + q.available,
      );
    }
    const pre = q.read(PREAMBLE_SIZE);
    for (let i = 0; i < MUX_MAGIC.length; i++) {
      if (pre[i] !== MUX_MAGIC[i]) throw new AvatarMuxError('bad_magic', 'not an avatar mux stream (bad magic)', 0);
    }
    const preView = new DataView(pre.buffer);
    const major = preView.getUint16(4, true);
    const minor = preView.getUint16(6, true);
    if (major !== MUX_VERSION_MAJOR) {
      throw new AvatarMuxError(
        'unsupported_version',
        `unsupported avatar mux version ${major}.${minor}: this reader supports ${MUX_VERSION_MAJOR}.x`,
        4,
      );
    }

    let header: MuxHeader | null = null;
    const states: TrackState[] = [];
    let events = 0;
    let maxPts = 0;

    for (;;) {
      const recordOffset = q.offset;
      if (!(await q.ensure(RECORD_HEADER_SIZE))) {
        const what = q.available === 0 ? 'stream ended before its end record' : 'stream ended inside a record header';
        throw new AvatarMuxError('truncated', what, q.offset + q.available);
      }
      const rh = q.read(RECORD_HEADER_SIZE);
      const rv = new DataView(rh.buffer);
      const type = rh[0]!;
      const flags = rh[1]!;
      const trackId = rv.getUint16(2, true);
      const length = rv.getUint32(4, true);
      const crc = rv.getUint32(8, true);
      if (length > maxRecordBytes) {
        throw new AvatarMuxError(
          'record_too_large',
          `record of type ${type} claims ${length} bytes, more than the ${maxRecordBytes} allowed`,
          recordOffset,
        );
      }
      if (!(await q.ensure(length))) {
        throw new AvatarMuxError(
          'truncated',
          `stream ended inside a record of type ${type} (${q.available} of ${length} payload bytes)`,
          q.offset + q.available,
        );
      }
      const payload = q.read(length);
      if (verify && crc32(payload, crc32(rh.subarray(0, 8))) !== crc) {
        throw new AvatarMuxError('checksum_mismatch', `record of type ${type} fails its CRC-32`, recordOffset);
      }
      const fail = (message: string): never => {
        throw new AvatarMuxError('malformed', message, recordOffset);
      };
      const view = new DataView(payload.buffer);

      if (header === null) {
        if (type !== RecordType.HEADER) fail(`the first record must be the header, found type ${type}`);
        header = parseHeader(payload, view, { major, minor }, fail);
        for (let i = 0; i < header.tracks.length; i++) {
          states.push({ cursor: header.tracks[i]!.kind === 'video' ? -1 : 0, count: 0, bytes: 0 });
        }
        yield header;
        continue;
      }

      switch (type) {
        case RecordType.HEADER:
          fail('a second header record');
          break;

        case RecordType.AUDIO: {
          const track = header.tracks[trackId];
          if (!track) fail(`audio record for track ${trackId}, which the header does not declare`);
          if (track!.kind === 'unknown') break;
          if (track!.kind !== 'audio') fail(`audio record for ${track!.kind} track ${trackId}`);
          const t = track as AudioTrack;
          if (length < AUDIO_PREFIX_SIZE) fail('audio record shorter than its prefix');
          const pts = readU64(view, 0);
          const sampleCount = view.getUint32(8, true);
          const st = states[trackId]!;
          if (pts !== st.cursor) fail(`audio on track ${trackId} is not contiguous: pts ${pts}, expected ${st.cursor}`);
          const data = payload.subarray(AUDIO_PREFIX_SIZE);
          const rec: MuxAudioChunk = {
            type: 'audio',
            track: trackId,
            codec: t.codec,
            pts,
            time: pts / header.clockRate,
            sampleCount,
            duration: sampleCount / header.clockRate,
            data,
          };
          if (t.codec === 'pcm_s16le') {
            if (data.length !== sampleCount * t.channels * 2) {
              fail(
                `pcm_s16le chunk of ${data.length} bytes does not hold ${sampleCount} samples x ${t.channels} channels`,
              );
            }
            rec.pcm = pcmView(data);
          }
          st.cursor = pts + sampleCount;
          st.count += sampleCount;
          st.bytes += data.length;
          maxPts = Math.max(maxPts, st.cursor);
          yield rec;
          break;
        }

        case RecordType.VIDEO: {
          const track = header.tracks[trackId];
          if (!track) fail(`video record for track ${trackId}, which the header does not declare`);
          if (track!.kind === 'unknown') break;
          if (track!.kind !== 'video') fail(`video record for ${track!.kind} track ${trackId}`);
          const t = track as VideoTrack;
          if (length < VIDEO_PREFIX_SIZE) fail('video record shorter than its prefix');
          const pts = readU64(view, 0);
          const st = states[trackId]!;
          if (pts < 0) fail('video pts out of range');
          if (pts <= st.cursor) fail(`video pts ${pts} on track ${trackId} does not increase (previous ${st.cursor})`);
          const data = payload.subarray(VIDEO_PREFIX_SIZE);
          if (t.codec === 'i420' && data.length !== i420Size(t.width, t.height)) {
            fail(
              `i420 frame of ${data.length} bytes, expected ${i420Size(t.width, t.height)} for ${t.width}x${t.height}`,
            );
          }
          if (data.length === 0) fail('empty video frame');
          const rec: MuxVideoFrame = {
            type: 'video',
            track: trackId,
            codec: t.codec,
            pts,
            time: pts / header.clockRate,
            index: st.count,
            keyframe: (flags & RecordFlag.KEYFRAME) !== 0,
            width: t.width,
            height: t.height,
            data,
          };
          st.cursor = pts;
          st.count += 1;
          st.bytes += data.length;
          maxPts = Math.max(maxPts, pts);
          yield rec;
          break;
        }

        case RecordType.EVENT: {
          if (length < EVENT_PREFIX_SIZE) fail('event record shorter than its prefix');
          const pts = readU64(view, 0);
          if (pts < 0) fail('event pts out of range');
          const durationSamples = view.getUint32(8, true);
          const nameLength = payload[12]!;
          if (nameLength === 0 || EVENT_PREFIX_SIZE + nameLength > length) fail('event name length out of range');
          const name = decodeText(payload.subarray(EVENT_PREFIX_SIZE, EVENT_PREFIX_SIZE + nameLength), fail);
          const rest = payload.subarray(EVENT_PREFIX_SIZE + nameLength);
          const data = rest.length === 0 ? null : parseJson(rest, 'event data', fail);
          events += 1;
          const rec: MuxEvent = { type: 'event', name, pts, time: pts / header.clockRate, durationSamples, data };
          yield rec;
          break;
        }

        case RecordType.END: {
          if (length < 16) fail('end record shorter than its prefix');
          const durationSamples = readU64(view, 0);
          const eventCount = view.getUint32(8, true);
          const trackCount = view.getUint16(12, true);
          if (durationSamples < 0) fail('end duration out of range');
          if (trackCount !== header.tracks.length)
            fail(`end record lists ${trackCount} tracks, the header ${header.tracks.length}`);
          if (length < 16 + 16 * trackCount) fail('end record too short for its track totals');
          const totals: MuxEnd['tracks'] = [];
          for (let i = 0; i < trackCount; i++) {
            const count = readU64(view, 16 + 16 * i);
            const bytes = readU64(view, 24 + 16 * i);
            const st = states[i]!;
            if (header.tracks[i]!.kind !== 'unknown' && (count !== st.count || bytes !== st.bytes)) {
              fail(
                `end totals of track ${i} (${count} units, ${bytes} bytes) do not match the stream (${st.count}, ${st.bytes}): records were lost`,
              );
            }
            totals.push({ track: i, count, bytes });
          }
          if (eventCount !== events) fail(`end record counts ${eventCount} events, the stream had ${events}`);
          if (durationSamples < maxPts) fail(`end duration ${durationSamples} is before the last media at ${maxPts}`);
          if (q.available > 0) fail('bytes after the end record');
          const rec: MuxEnd = {
            type: 'end',
            durationSamples,
            duration: durationSamples / header.clockRate,
            events,
            tracks: totals,
          };
          yield rec;
          return;
        }

        case RecordType.ERROR: {
          const obj = parseJson(payload, 'error record', fail);
          if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) fail('error record is not a JSON object');
          const { code, message, retryable, ...details } = obj as Record<string, unknown>;
          if (typeof code !== 'string' || typeof message !== 'string') fail('error record lacks code or message');
          if (q.available > 0) fail('bytes after the error record');
          const rec: MuxErrorRecord = {
            type: 'error',
            code: code as string,
            message: message as string,
            retryable: retryable === true,
            details,
          };
          yield rec;
          return;
        }

        default:
          // A record type from a later minor version: skipped by its length.
          break;
      }
    }
  } finally {
    await pull.close();
  }
}

function parseHeader(
  payload: Uint8Array,
  view: DataView,
  version: { major: number; minor: number },
  fail: (m: string) => never,
): MuxHeader {
  if (payload.length < 8) fail('header record shorter than its prefix');
  const clockRate = view.getUint32(0, true);
  const trackCount = view.getUint16(4, true);
  const descriptorSize = view.getUint16(6, true);
  if (clockRate === 0) fail('header clock rate is 0');
  if (descriptorSize < TRACK_DESCRIPTOR_SIZE)
    fail(`track descriptors of ${descriptorSize} bytes, at least ${TRACK_DESCRIPTOR_SIZE} needed`);
  const metaAt = 8 + trackCount * descriptorSize;
  if (payload.length < metaAt + 4) fail('header record too short for its track table');
  const tracks: MuxTrack[] = [];
  for (let id = 0; id < trackCount; id++) {
    const o = 8 + id * descriptorSize;
    const kindId = payload[o]!;
    const codecId = payload[o + 1]!;
    if (kindId === TrackKind.AUDIO) {
      const sampleRate = view.getUint32(o + 4, true);
      const channels = view.getUint16(o + 8, true);
      if (sampleRate !== clockRate)
        fail(`audio track ${id} at ${sampleRate} Hz; version 1 needs the clock rate ${clockRate}`);
      if (channels === 0) fail(`audio track ${id} has 0 channels`);
      tracks.push({ id, kind: 'audio', codec: audioCodecName(codecId), codecId, sampleRate, channels });
    } else if (kindId === TrackKind.VIDEO) {
      const width = view.getUint16(o + 12, true);
      const height = view.getUint16(o + 14, true);
      const fpsNum = view.getUint32(o + 16, true);
      const fpsDen = view.getUint32(o + 20, true);
      if (width === 0 || height === 0) fail(`video track ${id} is ${width}x${height}`);
      if (fpsNum === 0 || fpsDen === 0) fail(`video track ${id} has frame rate ${fpsNum}/${fpsDen}`);
      tracks.push({
        id,
        kind: 'video',
        codec: videoCodecName(codecId),
        codecId,
        width,
        height,
        fps: fpsNum / fpsDen,
        fpsNum,
        fpsDen,
      });
    } else {
      tracks.push({ id, kind: 'unknown', kindId, codecId });
    }
  }
  const metaLength = view.getUint32(metaAt, true);
  if (metaAt + 4 + metaLength > payload.length) fail('header metadata runs past the record');
  let metadata: Record<string, unknown> = {};
  if (metaLength > 0) {
    const m = parseJson(payload.subarray(metaAt + 4, metaAt + 4 + metaLength), 'header metadata', fail);
    if (typeof m !== 'object' || m === null || Array.isArray(m)) fail('header metadata is not a JSON object');
    metadata = m as Record<string, unknown>;
  }
  return { type: 'header', version, clockRate, tracks, metadata };
}

function decodeText(bytes: Uint8Array, fail: (m: string) => never): string {
  try {
    return textDecoder.decode(bytes);
  } catch {
    return fail('invalid UTF-8');
  }
}

function parseJson(bytes: Uint8Array, what: string, fail: (m: string) => never): unknown {
  const text = decodeText(bytes, fail);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return fail(`${what} is not valid JSON`);
  }
}

/** s16le bytes as an Int16Array (a view on little-endian hosts, where `data` is 2-aligned; a swapped copy otherwise). */
function pcmView(data: Uint8Array): Int16Array {
  const n = data.length >> 1;
  if (LITTLE_ENDIAN && data.byteOffset % 2 === 0) return new Int16Array(data.buffer, data.byteOffset, n);
  const out = new Int16Array(n);
  const v = new DataView(data.buffer, data.byteOffset, data.length);
  for (let i = 0; i < n; i++) out[i] = v.getInt16(2 * i, true);
  return out;
}

/** pcm_s16le samples as floats in [-1, 1), the form Web Audio's AudioBuffer takes. */
export function pcmToFloat32(pcm: Int16Array): Float32Array {
  const out = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = pcm[i]! / 32768;
  return out;
}
