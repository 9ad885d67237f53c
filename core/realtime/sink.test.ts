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

  it('drops a reader that takes nothing for stallMs while data waits', async () => {
    const stops: StopReason[] = [];
    const sink = new StreamSink({ maxQueuedBytes: 4, stallMs: 50, onStop: (r) => stops.push(r) });
    const reader = sink.readable.getReader();
    await expect(sink.write(bytes(8))).rejects.toEqual(new StreamStopped('stalled'));
    expect(stops).toEqual(['stalled']);
    await expect(reader.read()).rejects.toBeInstanceOf(StreamStopped);
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
