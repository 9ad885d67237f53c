import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AvatarMuxWriter } from '../render/encode/mux.ts';
import type { MuxTrackSpec } from '../render/encode/mux.ts';
import { RECORD_HEADER_SIZE, crc32 } from './format.ts';
import { AvatarMuxError, readAvatarMux } from './index.ts';
import type { AvatarMuxRecord, MuxAudioChunk, MuxEnd, MuxHeader, MuxVideoFrame } from './index.ts';

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Splits `bytes` at the given cut points (any positions, duplicates give empty chunks). */
function split(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...cuts.map((c) => c % (bytes.length + 1))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const p of points) {
    out.push(bytes.slice(prev, p));
    prev = p;
  }
  out.push(bytes.slice(prev));
  return out;
}

function readable(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < chunks.length) controller.enqueue(chunks[i++]!);
      else controller.close();
    },
  });
}

async function* iterable(chunks: Uint8Array[]): AsyncGenerator<Uint8Array> {
  for (const c of chunks) {
    await Promise.resolve();
    yield c;
  }
}

async function readAll(src: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): Promise<AvatarMuxRecord[]> {
  const out: AvatarMuxRecord[] = [];
  for await (const r of readAvatarMux(src)) out.push(r);
  return out;
}

async function readError(src: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): Promise<AvatarMuxError> {
  try {
    await readAll(src);
  } catch (e) {
    if (e instanceof AvatarMuxError) return e;
    throw e;
  }
  throw new Error('expected an AvatarMuxError');
}

const JPEG_STUB = (n: number) => {
  const b = new Uint8Array(Math.max(4, n));
  b[0] = 0xff;
  b[1] = 0xd8;
  for (let i = 2; i < b.length; i++) b[i] = (i * 31) & 0xff;
  return b;
};

/** A small, complete stream: 16 kHz mono PCM + 25 fps jpeg, 3 frames, events. */
function sampleStream(): { bytes: Uint8Array; parts: Uint8Array[] } {
  const w = new AvatarMuxWriter({
    tracks: [
      { kind: 'audio', sampleRate: 16000 },
      { kind: 'video', codec: 'jpeg', width: 64, height: 48, fps: 25 },
    ],
    metadata: { turn_id: 'turn_1' },
  });
  const parts = [w.start(), w.event('speech_start')];
  for (let i = 0; i < 3; i++) {
    parts.push(w.audio(new Int16Array(640).fill(i + 1)));
    parts.push(w.video(JPEG_STUB(100 + i)));
  }
  parts.push(w.event('speech_end'), w.end());
  return { bytes: concat(parts), parts };
}

describe('readAvatarMux round trip', () => {
  type Op =
    | { op: 'audio'; track: number; n: number; seed: number }
    | { op: 'video'; track: number; n: number; seed: number }
    | { op: 'event'; name: string; data: unknown };

  const trackArb: fc.Arbitrary<MuxTrackSpec[]> = fc
    .record({
      sampleRate: fc.constantFrom(8000, 16000, 22050, 24000, 44100, 48000),
      channels: fc.integer({ min: 1, max: 2 }),
      videos: fc.array(
        fc.record({
          codec: fc.constantFrom('jpeg' as const, 'i420' as const),
          width: fc.integer({ min: 1, max: 9 }),
          height: fc.integer({ min: 1, max: 9 }),
          fps: fc.constantFrom<MuxTrackSpec extends never ? never : number | { num: number; den: number }>(
            25,
            30,
            { num: 30000, den: 1001 },
            12.5,
          ),
        }),
        { minLength: 0, maxLength: 2 },
      ),
    })
    .map(({ sampleRate, channels, videos }) => [
      { kind: 'audio', sampleRate, channels } as MuxTrackSpec,
      ...videos.map((v) => ({ kind: 'video', ...v }) as MuxTrackSpec),
    ]);

  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({
      op: fc.constant('audio' as const),
      track: fc.constant(0),
      n: fc.integer({ min: 0, max: 700 }),
      seed: fc.integer(),
    }),
    fc.record({
      op: fc.constant('video' as const),
      track: fc.integer({ min: 1, max: 2 }),
      n: fc.integer({ min: 4, max: 300 }),
      seed: fc.integer(),
    }),
    fc.record({
      op: fc.constant('event' as const),
      name: fc.constantFrom('speech_start', 'speech_end', 'viseme', 'word', 'mark', 'ünïcode_ëvent'),
      data: fc.oneof(fc.constant(undefined), fc.jsonValue()),
    }),
  );

  it('decodes exactly what was written, whatever the chunk boundaries', async () => {
    await fc.assert(
      fc.asyncProperty(
        trackArb,
        fc.array(opArb, { maxLength: 40 }),
        fc.array(fc.nat(), { maxLength: 60 }),
        fc.boolean(),
        fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 3 }),
        async (tracks, ops, cuts, useIterable, metadata) => {
          const w = new AvatarMuxWriter({ tracks, metadata });
          const parts = [w.start()];
          const expected: {
            kind: string;
            track?: number;
            data?: Uint8Array;
            pts?: number;
            name?: string;
            json?: unknown;
          }[] = [];
          let audioPos = 0;
          const channels = (tracks[0] as { channels: number }).channels;
          for (const op of ops) {
            if (op.op === 'audio') {
              const pcm = new Int16Array(op.n * channels);
              for (let i = 0; i < pcm.length; i++) pcm[i] = ((op.seed + i * 7919) % 65536) - 32768;
              parts.push(w.audio(pcm));
              expected.push({ kind: 'audio', track: 0, data: new Uint8Array(pcm.buffer.slice(0)), pts: audioPos });
              audioPos += op.n;
            } else if (op.op === 'video') {
              const t = tracks[op.track];
              if (!t || t.kind !== 'video') continue;
              const data =
                t.codec === 'jpeg'
                  ? JPEG_STUB(op.n)
                  : new Uint8Array(t.width * t.height + 2 * Math.ceil(t.width / 2) * Math.ceil(t.height / 2)).map(
                      (_, i) => (i + op.seed) & 0xff,
                    );
              const pts = w.nextVideoPts(op.track);
              parts.push(w.video(data, { track: op.track }));
              expected.push({ kind: 'video', track: op.track, data, pts });
            } else {
              parts.push(w.event(op.name, op.data));
              expected.push({
                kind: 'event',
                name: op.name,
                json: op.data === undefined ? null : JSON.parse(JSON.stringify(op.data)),
                pts: audioPos,
              });
            }
          }
          parts.push(w.end());
          const bytes = concat(parts);
          const chunks = split(bytes, cuts);
          const records = await readAll(useIterable ? iterable(chunks) : readable(chunks));

          const header = records[0] as MuxHeader;
          expect(header.type).toBe('header');
          expect(header.clockRate).toBe((tracks[0] as { sampleRate: number }).sampleRate);
          expect(header.metadata).toEqual(JSON.parse(JSON.stringify(metadata)));
          expect(header.tracks.map((t) => t.kind)).toEqual(tracks.map((t) => t.kind));
          tracks.forEach((t, i) => {
            const h = header.tracks[i]!;
            if (t.kind === 'video' && h.kind === 'video') {
              expect([h.codec, h.width, h.height]).toEqual([t.codec, t.width, t.height]);
            }
          });
          const body = records.slice(1, -1);
          expect(body.length).toBe(expected.length);
          body.forEach((r, i) => {
            const e = expected[i]!;
            expect(r.type).toBe(e.kind);
            if (r.type === 'audio' || r.type === 'video') {
              expect(r.track).toBe(e.track);
              expect(r.pts).toBe(e.pts);
              expect(r.time).toBeCloseTo(e.pts! / header.clockRate, 9);
              expect(Buffer.from(r.data).equals(Buffer.from(e.data!))).toBe(true);
            }
            if (r.type === 'audio')
              expect(
                Buffer.from(r.pcm!.buffer, r.pcm!.byteOffset, r.pcm!.byteLength).equals(Buffer.from(e.data!)),
              ).toBe(true);
            if (r.type === 'event') {
              expect(r.name).toBe(e.name);
              expect(r.data).toEqual(e.json);
              expect(r.pts).toBe(e.pts);
            }
          });
          const end = records.at(-1) as MuxEnd;
          expect(end.type).toBe('end');
          expect(end.durationSamples).toBeGreaterThanOrEqual(audioPos);
          expect(end.tracks[0]!.count).toBe(audioPos);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('gives video frames audio-clock timestamps: 25 fps at 16 kHz is 640 samples a frame, 29.97 at 48 kHz never drifts', async () => {
    const w = new AvatarMuxWriter({
      tracks: [
        { kind: 'audio', sampleRate: 48000 },
        { kind: 'video', codec: 'jpeg', width: 8, height: 8, fps: 29.97 },
      ],
    });
    const parts = [w.start()];
    for (let i = 0; i < 30000; i++) parts.push(w.video(JPEG_STUB(4)));
    parts.push(w.end());
    const frames = (await readAll(readable([concat(parts)]))).filter((r): r is MuxVideoFrame => r.type === 'video');
    // Frame 30000 of 30000/1001 fps is exactly 1001 s: 48,048,000 samples.
    expect(frames[29999]!.pts).toBe(Math.round((29999 * 48000 * 1001) / 30000));
    expect(frames.every((f, i) => Math.abs(f.time - (i * 1001) / 30000) < 0.5 / 48000)).toBe(true);
  });
});

describe('readAvatarMux streaming', () => {
  it('yields the header and first media before the stream ends, and cancels the source on break', async () => {
    const { parts } = sampleStream();
    let cancelled = false;
    let pulls = 0;
    const src = new ReadableStream<Uint8Array>({
      pull(controller) {
        // Only the first three records ever arrive; the stream stays open.
        if (pulls < 3) controller.enqueue(parts[pulls]!);
        pulls++;
      },
      cancel() {
        cancelled = true;
      },
    });
    const seen: string[] = [];
    for await (const r of readAvatarMux(src)) {
      seen.push(r.type);
      if (r.type === 'audio') break;
    }
    expect(seen).toEqual(['header', 'event', 'audio']);
    expect(cancelled).toBe(true);
  });

  it('reads one byte at a time', async () => {
    const { bytes } = sampleStream();
    const records = await readAll(iterable(Array.from(bytes, (b) => new Uint8Array([b]))));
    expect(records.map((r) => r.type)).toEqual([
      'header',
      'event',
      'audio',
      'video',
      'audio',
      'video',
      'audio',
      'video',
      'event',
      'end',
    ]);
    const a = records[4] as MuxAudioChunk;
    expect([a.pts, a.sampleCount, a.time, a.duration, a.pcm![0]]).toEqual([640, 640, 0.04, 0.04, 2]);
    const v = records[5] as MuxVideoFrame;
    expect([v.pts, v.time, v.index, v.keyframe, v.width, v.height]).toEqual([640, 0.04, 1, true, 64, 48]);
    const end = records[9] as MuxEnd;
    expect(end).toMatchObject({ durationSamples: 1920, duration: 0.12, events: 2 });
    expect(end.tracks).toEqual([
      { track: 0, count: 1920, bytes: 3840 },
      { track: 1, count: 3, bytes: 303 },
    ]);
  });

  it('surfaces an error record from the server as the last record', async () => {
    const w = new AvatarMuxWriter({ tracks: [{ kind: 'audio', sampleRate: 16000 }] });
    const bytes = concat([
      w.start(),
      w.audio(new Int16Array(10)),
      w.error('tts_failed', 'speech synthesis failed', { retryable: true, details: { stage: 'tts' } }),
    ]);
    const records = await readAll(readable([bytes]));
    expect(records.at(-1)).toEqual({
      type: 'error',
      code: 'tts_failed',
      message: 'speech synthesis failed',
      retryable: true,
      details: { stage: 'tts' },
    });
  });

  it('accepts an error before any media (writer emits the header first)', async () => {
    const w = new AvatarMuxWriter({ tracks: [{ kind: 'audio', sampleRate: 16000 }] });
    const records = await readAll(readable([w.error('internal', 'boom')]));
    expect(records.map((r) => r.type)).toEqual(['header', 'error']);
  });
});

describe('readAvatarMux rejects bad streams', () => {
  it('reports truncation at every possible cut', async () => {
    const { bytes } = sampleStream();
    for (let cut = 0; cut < bytes.length; cut++) {
      const err = await readError(readable(split(bytes.subarray(0, cut), [cut >> 1])));
      expect(err.code, `cut at ${cut}`).toBe('truncated');
    }
  });

  // Bits 48..63 are the minor version, which a reader accepts whatever its value (next test).
  const MINOR_BITS = [48, 64];

  it('detects any single flipped bit outside the minor version', async () => {
    const { bytes } = sampleStream();
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: bytes.length * 8 - 1 }).filter((b) => b < MINOR_BITS[0]! || b >= MINOR_BITS[1]!),
        async (bit) => {
          const bad = bytes.slice();
          bad[bit >> 3]! ^= 1 << (bit & 7);
          const err = await readError(readable([bad]));
          expect([
            'bad_magic',
            'unsupported_version',
            'checksum_mismatch',
            'truncated',
            'record_too_large',
            'malformed',
          ]).toContain(err.code);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('reads a stream of any minor version (forward compatible)', async () => {
    const { bytes } = sampleStream();
    const expected = await readAll(readable([bytes]));
    for (let bit = MINOR_BITS[0]!; bit < MINOR_BITS[1]!; bit++) {
      const later = bytes.slice();
      later[bit >> 3]! ^= 1 << (bit & 7);
      expect((await readAll(readable([later]))).length, `minor version bit ${bit}`).toBe(expected.length);
    }
  });

  it('names a checksum mismatch in a payload', async () => {
    const { bytes } = sampleStream();
    const bad = bytes.slice();
    bad[bad.length - 30]! ^= 0x40; // inside the end record's payload
    const err = await readError(readable([bad]));
    expect(err.code).toBe('checksum_mismatch');
    expect(err.message).toMatch(/CRC-32/);
  });

  it('rejects bad magic, and a major version it does not know', async () => {
    const { bytes } = sampleStream();
    const notMux = new TextEncoder().encode('{"error":"not found"}');
    expect((await readError(readable([notMux]))).code).toBe('bad_magic');

    const v2 = bytes.slice();
    v2[4] = 2;
    const err = await readError(readable([v2]));
    expect(err.code).toBe('unsupported_version');
    expect(err.message).toMatch(/version 2\.0/);
  });

  it('accepts a newer minor version and skips record types it does not know', async () => {
    const { parts } = sampleStream();
    const pre = parts[0]!.slice();
    pre[6] = 7; // minor 7
    const payload = new TextEncoder().encode('future stuff');
    const unknown = new Uint8Array(RECORD_HEADER_SIZE + payload.length);
    const v = new DataView(unknown.buffer);
    unknown[0] = 0x42;
    v.setUint32(4, payload.length, true);
    unknown.set(payload, RECORD_HEADER_SIZE);
    v.setUint32(8, crc32(payload, crc32(unknown.subarray(0, 8))), true);
    const bytes = concat([pre, parts[1]!, unknown, ...parts.slice(2)]);
    const records = await readAll(readable([bytes]));
    expect((records[0] as MuxHeader).version).toEqual({ major: 1, minor: 7 });
    expect(records.map((r) => r.type)).toEqual([
      'header',
      'event',
      'audio',
      'video',
      'audio',
      'video',
      'audio',
      'video',
      'event',
      'end',
    ]);
  });

  it('notices a lost record through the end totals', async () => {
    const { parts } = sampleStream();
    // Drop the last video frame (audio stays contiguous, so only the totals can tell).
    const bytes = concat([...parts.slice(0, 7), ...parts.slice(8)]);
    const err = await readError(readable([bytes]));
    expect(err.code).toBe('malformed');
    expect(err.message).toMatch(/records were lost/);
  });

  it('notices lost audio through contiguity', async () => {
    const { parts } = sampleStream();
    const bytes = concat([...parts.slice(0, 4), ...parts.slice(5)]);
    const err = await readError(readable([bytes]));
    expect(err.message).toMatch(/not contiguous/);
  });

  it('rejects a record length over the limit before buffering it', async () => {
    const { bytes } = sampleStream();
    const err = await (async () => {
      try {
        for await (const _ of readAvatarMux(readable([bytes]), { maxRecordBytes: 64 })) {
          // drain
        }
      } catch (e) {
        return e as AvatarMuxError;
      }
      throw new Error('no error');
    })();
    expect(err.code).toBe('record_too_large');
  });

  it('rejects trailing bytes after the end record and media before the header', async () => {
    const { bytes, parts } = sampleStream();
    expect((await readError(readable([concat([bytes, new Uint8Array([0])])]))).message).toMatch(/after the end record/);
    // The reader stops at the end record: it does not wait for (or read) a later chunk.
    expect((await readAll(readable([bytes, new Uint8Array([0])]))).at(-1)!.type).toBe('end');
    const noHeader = concat([parts[0]!.subarray(0, 8), parts[2]!]);
    expect((await readError(readable([noHeader]))).message).toMatch(/first record must be the header/);
  });

  it('rejects chunks that are not bytes', async () => {
    const src = (async function* () {
      yield 'AVMX' as unknown as Uint8Array;
    })();
    await expect(readAll(src)).rejects.toThrow(TypeError);
  });
});
