import { describe, expect, it } from 'vitest';
import { StreamSink, StreamStopped, type StopReason } from './sink.ts';

const bytes = (n: number, v = 1) => new Uint8Array(n).fill(v);

describe('StreamSink', () => {
  it('hands chunks over in order, counting only what the reader took, and runs ahead by at most its bound', async () => {
    const sink = new StreamSink({ maxQueuedBytes: 10, stallMs: 60_000 });
    const reader = sink.readable.getReader();
    await sink.write(bytes(4, 1), { audioSamples: 100 });
    await sink.write(bytes(4, 2), { audioSamples: 200 });
    expect(sink.deliveredAudioSamples).toBe(0);
    // Over the bound: the write waits until the reader takes something.
    let third = false;
    const writing = sink.write(bytes(4, 3), { audioSamples: 300 }).then(() => (third = true));
    await new Promise((r) => setImmediate(r));
    expect(third).toBe(false);
    expect((await reader.read()).value).toEqual(bytes(4, 1));
    await writing;
    expect(sink.deliveredAudioSamples).toBe(100);
    const closing = sink.close();
    expect((await reader.read()).value).toEqual(bytes(4, 2));
    expect((await reader.read()).value).toEqual(bytes(4, 3));
    expect((await reader.read()).done).toBe(true);
    await closing;
    expect(sink).toMatchObject({ deliveredAudioSamples: 600, deliveredBytes: 12, stopped: undefined });
  });

  it('stops when the reader cancels (the client left): waiting writes fail, what was taken stays counted', async () => {
    const stops: StopReason[] = [];
    const sink = new StreamSink({ maxQueuedBytes: 4, stallMs: 60_000, onStop: (r) => stops.push(r) });
    const reader = sink.readable.getReader();
    await sink.write(bytes(4), { audioSamples: 10 });
    await reader.read();
    const waiting = sink.write(bytes(8), { audioSamples: 20 });
    await reader.cancel();
    await expect(waiting).rejects.toEqual(new StreamStopped('client_closed'));
    await expect(sink.write(bytes(1))).rejects.toBeInstanceOf(StreamStopped);
    expect(stops).toEqual(['client_closed']);
    expect(sink.deliveredAudioSamples).toBe(10);
  });

  it('stops a reader that takes nothing for stallMs while data waits: what waited is dropped, the producer ends the stream with its own last record', async () => {
    const stops: StopReason[] = [];
    const sink = new StreamSink({
      maxQueuedBytes: 4,
      stallMs: 50,
      onStop: (r) => stops.push(r),
      onAbandon: () => expect.unreachable(),
    });
    const reader = sink.readable.getReader();
    await expect(sink.write(bytes(8), { audioSamples: 7 })).rejects.toEqual(new StreamStopped('stalled'));
    expect(stops).toEqual(['stalled']);
    // The body is not errored (an HTTP server would append text of its own to it): it ends with the record.
    sink.end(bytes(3, 9));
    expect((await reader.read()).value).toEqual(bytes(3, 9));
    expect((await reader.read()).done).toBe(true);
    expect(sink.deliveredAudioSamples).toBe(0);
  });

  it('abandons a stalled reader that takes nothing of the last record either', async () => {
    let abandoned = 0;
    const sink = new StreamSink({ maxQueuedBytes: 4, stallMs: 30, onAbandon: () => abandoned++ });
    const reader = sink.readable.getReader();
    await expect(sink.write(bytes(8))).rejects.toBeInstanceOf(StreamStopped);
    sink.end(bytes(3));
    await new Promise((r) => setTimeout(r, 120));
    expect(abandoned).toBe(1);
    expect((await reader.read()).done).toBe(true);
  });

  it('a producer that broke ends the stream after what is queued, and a reader that left takes no last record', async () => {
    const sink = new StreamSink({ maxQueuedBytes: 100, stallMs: 60_000 });
    const reader = sink.readable.getReader();
    await sink.write(bytes(2, 1));
    sink.end(bytes(2, 2));
    expect((await reader.read()).value).toEqual(bytes(2, 1));
    expect((await reader.read()).value).toEqual(bytes(2, 2));
    expect((await reader.read()).done).toBe(true);

    const left = new StreamSink({ maxQueuedBytes: 100, stallMs: 60_000 });
    const r2 = left.readable.getReader();
    await r2.cancel();
    left.end(bytes(1));
    expect(left.deliveredBytes).toBe(0);
  });

  it('an idle stream with nothing waiting is not a stall', async () => {
    const sink = new StreamSink({ maxQueuedBytes: 4, stallMs: 20, onStop: () => expect.unreachable() });
    const reader = sink.readable.getReader();
    const read = reader.read();
    await new Promise((r) => setTimeout(r, 60));
    await sink.write(bytes(2), { audioSamples: 5 });
    expect((await read).value).toEqual(bytes(2));
    await sink.close();
    expect(sink.deliveredAudioSamples).toBe(5);
  });
});
