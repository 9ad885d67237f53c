/**
 * The body of a streamed answer, fed by a producer that may run ahead of the client by a bounded
 * amount. It counts what it handed to the connection: each chunk is given to the reader (the HTTP
 * server writing to the socket) only when the reader asks for one, so "delivered" means written to
 * the connection, and a client that left is billed for no more than that.
 *
 *   const sink = new StreamSink({ maxQueuedBytes: 1 << 20, stallMs: 30_000, onStop });
 *   return new Response(sink.readable);
 *   await sink.write(bytes, { audioSamples });   // waits while the queue is full; throws once stopped
 *   await sink.close();                          // resolves when all of it was handed over
 *
 * The stream stops when the reader cancels (the client disconnected) or stops reading for
 * `stallMs` while data waits (a stuck client: what waits is dropped). The producer then ends it
 * with `end(record)`, a last record saying so, as it ends a failed stream: the body is never
 * errored, since the HTTP server would cut it off with text of its own appended to the bytes. A
 * reader that takes nothing of that record for `stallMs` either is abandoned (`onAbandon`: the
 * connection is dropped).
 */
export type StopReason = 'client_closed' | 'stalled';

export class StreamStopped extends Error {
  override name = 'StreamStopped';
  constructor(readonly reason: StopReason) {
    super(reason === 'client_closed' ? 'the client closed the connection' : 'the client stopped reading');
  }
}

interface Queued {
  bytes: Uint8Array;
  audioSamples: number;
}

export interface StreamSinkOptions {
  /** Bytes the producer may run ahead of the reader. */
  maxQueuedBytes: number;
  /** A reader that takes nothing for this long while data waits is dropped. */
  stallMs: number;
  /** Called once when the stream stops early (to cancel upstream work at once). */
  onStop?: (reason: StopReason) => void;
  /** Called once when a stalled reader did not take the stream's last record either: drop its connection. */
  onAbandon?: () => void;
}

export class StreamSink {
  readonly readable: ReadableStream<Uint8Array>;
  /** Bytes and audio samples handed to the reader so far. */
  deliveredBytes = 0;
  deliveredAudioSamples = 0;
  /** Why the stream stopped early, if it did. */
  stopped: StopReason | undefined;

  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private readonly queue: Queued[] = [];
  private queuedBytes = 0;
  /** A read waiting for data (the pull promise's resolve). */
  private reading: (() => void) | undefined;
  /** Producers waiting for room, or for the queue to drain (close). */
  private waiters: { resolve: () => void; reject: (e: unknown) => void; until: () => boolean }[] = [];
  private closing = false;
  private done = false;
  private stallTimer: NodeJS.Timeout | undefined;

  constructor(private readonly o: StreamSinkOptions) {
    this.readable = new ReadableStream<Uint8Array>(
      {
        start: (c) => {
          this.controller = c;
        },
        pull: () => {
          if (this.queue.length > 0) {
            this.hand();
            return;
          }
          return new Promise<void>((resolve) => (this.reading = resolve));
        },
        // A reader that leaves after a stall leaves nothing to end.
        cancel: () => (this.stopped ? this.drop() : this.stop('client_closed')),
      },
      // Nothing is buffered inside the stream: a chunk leaves the queue only for a waiting read.
      { highWaterMark: 0 },
    );
  }

  /** Queues bytes (and the audio they carry); waits while the queue is over its bound. */
  async write(bytes: Uint8Array, meta: { audioSamples?: number } = {}): Promise<void> {
    if (this.stopped) throw new StreamStopped(this.stopped);
    if (this.closing || this.done) throw new Error('sink: write after close');
    this.enqueue(bytes, meta.audioSamples ?? 0);
    if (this.queuedBytes > this.o.maxQueuedBytes) await this.wait(() => this.queuedBytes <= this.o.maxQueuedBytes);
  }

  /** Resolves once everything queued so far was handed over (throws if the stream stopped first). */
  async drained(): Promise<void> {
    if (this.stopped) throw new StreamStopped(this.stopped);
    if (this.queue.length > 0) await this.wait(() => this.queue.length === 0);
  }

  /** Ends the stream once everything queued was handed over; resolves then (throws if it stopped first). */
  async close(): Promise<void> {
    if (this.stopped) throw new StreamStopped(this.stopped);
    this.closing = true;
    if (this.queue.length === 0) this.finish();
    else await this.wait(() => this.done);
  }

  /**
   * Ends the stream with `last` (a record saying why: the producer broke, or the reader stalled)
   * after whatever is still queued; nothing is queued any more after a stall. A no-op once the
   * reader left or the stream ended.
   */
  end(last: Uint8Array): void {
    if (this.done || this.stopped === 'client_closed') return;
    this.closing = true;
    this.enqueue(last, 0);
  }

  /** Queues bytes, hands them straight to a reader that is waiting, and (re)arms the stall timer. */
  private enqueue(bytes: Uint8Array, audioSamples: number): void {
    this.queue.push({ bytes, audioSamples });
    this.queuedBytes += bytes.length;
    if (this.reading) {
      const resolve = this.reading;
      this.reading = undefined;
      this.hand();
      resolve();
    }
    this.armStall();
  }

  private hand(): void {
    const q = this.queue.shift()!;
    this.queuedBytes -= q.bytes.length;
    this.controller.enqueue(q.bytes);
    this.deliveredBytes += q.bytes.length;
    this.deliveredAudioSamples += q.audioSamples;
    if (this.closing && this.queue.length === 0) this.finish();
    this.armStall();
    this.waiters = this.waiters.filter((w) => {
      if (!w.until()) return true;
      w.resolve();
      return false;
    });
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.stallTimer);
    this.controller.close();
  }

  /** The stall clock runs while data waits for a reader: a first stall stops the stream, a second (its last record untaken) abandons it. */
  private armStall(): void {
    clearTimeout(this.stallTimer);
    if (this.queue.length === 0 || this.done) return;
    this.stallTimer = setTimeout(() => (this.stopped ? this.abandon() : this.stop('stalled')), this.o.stallMs);
    this.stallTimer.unref();
  }

  private abandon(): void {
    this.drop();
    this.controller.close();
    this.o.onAbandon?.();
  }

  /** Nothing more is handed over. */
  private drop(): void {
    this.done = true;
    clearTimeout(this.stallTimer);
    this.queue.length = 0;
    this.queuedBytes = 0;
  }

  private stop(reason: StopReason): void {
    if (this.stopped || this.done) return;
    this.stopped = reason;
    clearTimeout(this.stallTimer);
    // Dropped, not delivered: billing counts what the reader took.
    this.queue.length = 0;
    this.queuedBytes = 0;
    this.reading?.();
    this.reading = undefined;
    this.rejectWaiters(new StreamStopped(reason));
    this.o.onStop?.(reason);
  }

  private rejectWaiters(err: unknown): void {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w.reject(err);
  }

  private wait(until: () => boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject, until }));
  }
}
