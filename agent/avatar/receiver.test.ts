import type { ByteStreamReader, Room, RpcInvocationData } from '@livekit/rtc-node';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../core/platform/log.ts';
import type { SpeechPlayout } from './playout.ts';
import { RPC_PAUSE_SPEECH, RPC_RESUME_SPEECH } from '../protocol.ts';
import {
  AUDIO_STREAM_TOPIC,
  AvatarAudioReceiver,
  MAX_PENDING_SEGMENTS,
  RPC_CLEAR_BUFFER,
  RPC_PLAYBACK_FINISHED,
  RPC_PLAYBACK_STARTED,
  STREAM_IDLE_MS,
} from './receiver.ts';

const AGENT = 'agent-1';
const SR = 24_000;

type ByteHandler = (reader: ByteStreamReader, from: { identity: string }) => void;
type RpcHandler = (data: RpcInvocationData) => Promise<string>;

/** The parts of a Room the receiver touches, in memory: handlers are kept, RPCs sent are listed. */
function fakeRoom() {
  const byteHandlers = new Map<string, ByteHandler>();
  const rpcMethods = new Map<string, RpcHandler>();
  const sent: { method: string; payload: string }[] = [];
  let rpcFailure: { code: number } | null = null;
  const room = {
    isConnected: true,
    registerByteStreamHandler: (topic: string, h: ByteHandler) => byteHandlers.set(topic, h),
    unregisterByteStreamHandler: (topic: string) => byteHandlers.delete(topic),
    registerTextStreamHandler: () => {},
    localParticipant: {
      registerRpcMethod: (method: string, h: RpcHandler) => rpcMethods.set(method, h),
      unregisterRpcMethod: (method: string) => rpcMethods.delete(method),
      performRpc: async ({ method, payload }: { method: string; payload: string }) => {
        sent.push({ method, payload });
        if (rpcFailure) throw rpcFailure;
        return '';
      },
    },
  };
  return {
    room: room as unknown as Room,
    byteHandlers,
    rpcMethods,
    sent,
    failRpcsWith: (err: { code: number } | null) => (rpcFailure = err),
  };
}

/** A playout that records what the receiver hands it; `accepts` samples at most before it refuses more. */
function fakePlayout(accepts = Infinity, interrupt: () => void = () => {}) {
  const calls: string[] = [];
  const pushed: number[] = [];
  /** What each segment got, by id. */
  const bySegment = new Map<string, number[]>();
  let interrupts = 0;
  const playout = {
    sampleRate: SR,
    bufferedSeconds: 0,
    begin: (id: string) => calls.push(`begin ${id}`),
    end: (id: string) => calls.push(`end ${id}`),
    push: (id: string, pcm: Int16Array) => {
      pushed.push(...pcm);
      bySegment.set(id, [...(bySegment.get(id) ?? []), ...pcm]);
      return pushed.length <= accepts;
    },
    interrupt: () => {
      interrupts++;
      interrupt();
    },
    pause: () => calls.push('pause'),
    resume: () => calls.push('resume'),
  };
  return { playout: playout as unknown as SpeechPlayout, calls, pushed, bySegment, interrupts: () => interrupts };
}

/** A byte stream of `chunks`, as rtc-node's reader hands them over. */
function stream(
  id: string,
  chunks: Uint8Array[],
  attributes: Record<string, string> = { sample_rate: String(SR), num_channels: '1' },
) {
  let closed = false;
  const reader = {
    info: { streamId: id, attributes },
    close: async () => void (closed = true),
    readAll: async () => chunks,
    async *[Symbol.asyncIterator]() {
      for (const c of chunks) {
        if (closed) return;
        yield c;
      }
    },
  };
  return { reader: reader as unknown as ByteStreamReader, closed: () => closed };
}

/** A byte stream fed by the test as it goes: `write` a chunk, `end` it, or neither (its end lost). */
function liveStream(id: string) {
  const queue: Uint8Array[] = [];
  let ended = false;
  let closed = false;
  let wake: (() => void) | null = null;
  const poke = () => {
    wake?.();
    wake = null;
  };
  const reader = {
    info: { streamId: id, attributes: { sample_rate: String(SR), num_channels: '1' } },
    close: async () => {
      closed = true;
      poke();
    },
    async *[Symbol.asyncIterator]() {
      for (;;) {
        if (closed) return;
        const next = queue.shift();
        if (next) yield next;
        else if (ended) return;
        else await new Promise<void>((r) => (wake = r));
      }
    },
  };
  return {
    reader: reader as unknown as ByteStreamReader,
    closed: () => closed,
    write: (b: Uint8Array) => {
      queue.push(b);
      poke();
    },
    end: () => {
      ended = true;
      poke();
    },
  };
}

function pcmBytes(samples: number[]): Uint8Array {
  return new Uint8Array(Int16Array.from(samples).buffer);
}

function started(accepts?: number, interrupt?: () => void) {
  const r = fakeRoom();
  const p = fakePlayout(accepts, interrupt);
  const receiver = new AvatarAudioReceiver({
    room: r.room,
    playout: p.playout,
    senderIdentity: AGENT,
    log: createLogger('silent'),
  });
  receiver.start();
  const send = (from: string, s: { reader: ByteStreamReader }) =>
    r.byteHandlers.get(AUDIO_STREAM_TOPIC)!(s.reader, { identity: from });
  return { ...r, ...p, receiver, send };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

afterEach(() => {
  vi.useRealTimers();
});

describe('AvatarAudioReceiver', () => {
  it("plays the agent's stream as one segment, a sample split across chunks included", async () => {
    const t = started();
    const bytes = pcmBytes([1, -2, 300, -400]);
    t.send(AGENT, stream('s1', [bytes.slice(0, 3), bytes.slice(3)]));
    await settle();
    expect(t.calls).toEqual(['begin s1', 'end s1']);
    expect(t.pushed).toEqual([1, -2, 300, -400]);
  });

  it('mixes a stereo stream down to mono', async () => {
    const t = started();
    t.send(AGENT, stream('s1', [pcmBytes([100, 300, -10, -30])], { sample_rate: String(SR), num_channels: '2' }));
    await settle();
    expect(t.pushed).toEqual([200, -20]);
  });

  it('closes a stream from anyone but its agent, unplayed', async () => {
    const t = started();
    const s = stream('s1', [pcmBytes([1, 2])]);
    t.send('someone-else', s);
    await settle();
    expect(s.closed()).toBe(true);
    expect(t.calls).toEqual([]);
  });

  it('answers a stream with unusable attributes as played, without reading it', async () => {
    const t = started();
    const s = stream('s1', [pcmBytes([1, 2])], { sample_rate: '100' });
    t.send(AGENT, s);
    await settle();
    expect(t.calls).toEqual(['begin s1', 'end s1']);
    expect(t.pushed).toEqual([]);
    expect(s.closed()).toBe(true);
  });

  it('stops reading a stream once the playout holds all it may', async () => {
    const t = started(2);
    const s = stream('s1', [pcmBytes([1, 2]), pcmBytes([3, 4]), pcmBytes([5, 6])]);
    t.send(AGENT, s);
    await settle();
    expect(t.pushed).toEqual([1, 2, 3, 4]);
    expect(s.closed()).toBe(true);
    expect(t.calls).toEqual(['begin s1', 'end s1']);
  });

  it(`answers streams beyond ${MAX_PENDING_SEGMENTS} unfinished ones at once`, async () => {
    const t = started();
    for (let i = 0; i <= MAX_PENDING_SEGMENTS; i++) t.send(AGENT, stream(`s${i}`, [pcmBytes([i])]));
    await settle();
    // Every stream is answered; the last one without its audio reaching the playout.
    expect(t.calls.filter((c) => c.startsWith('end'))).toHaveLength(MAX_PENDING_SEGMENTS + 1);
    expect(t.pushed).not.toContain(MAX_PENDING_SEGMENTS);
  });

  it('clears the playout for its agent only', async () => {
    const t = started();
    const clear = t.rpcMethods.get(RPC_CLEAR_BUFFER)!;
    expect(await clear({ callerIdentity: 'someone-else' } as RpcInvocationData)).toBe('reject');
    expect(t.interrupts()).toBe(0);
    expect(await clear({ callerIdentity: AGENT } as RpcInvocationData)).toBe('ok');
    expect(t.interrupts()).toBe(1);
  });

  it('holds and resumes the speech for its agent only (our RPCs, for an interruption that may be noise)', async () => {
    const t = started();
    const pause = t.rpcMethods.get(RPC_PAUSE_SPEECH)!;
    const resume = t.rpcMethods.get(RPC_RESUME_SPEECH)!;
    expect(await pause({ callerIdentity: 'someone-else' } as RpcInvocationData)).toBe('reject');
    expect(await resume({ callerIdentity: 'someone-else' } as RpcInvocationData)).toBe('reject');
    expect(t.calls).toEqual([]);
    expect(await pause({ callerIdentity: AGENT } as RpcInvocationData)).toBe('ok');
    expect(await resume({ callerIdentity: AGENT } as RpcInvocationData)).toBe('ok');
    expect(t.calls).toEqual(['pause', 'resume']);
  });

  it('answers clear_buffer with nothing playing, and when clearing the playout fails', async () => {
    const t = started(undefined, () => {
      if (t.interrupts() > 1) throw new Error('the audio source is gone');
    });
    const clear = t.rpcMethods.get(RPC_CLEAR_BUFFER)!;
    expect(await clear({ callerIdentity: AGENT } as RpcInvocationData)).toBe('ok');
    expect(await clear({ callerIdentity: AGENT } as RpcInvocationData)).toBe('ok');
    expect(t.interrupts()).toBe(2);
  });

  it("reads a stream to its end though the agent's next stream begins before its last chunks are read", async () => {
    const t = started();
    t.send(AGENT, stream('s1', [pcmBytes([1, 2]), pcmBytes([3, 4]), pcmBytes([5, 6])]));
    t.send(AGENT, stream('s2', [pcmBytes([7, 8])]));
    await settle();
    expect(t.bySegment.get('s1')).toEqual([1, 2, 3, 4, 5, 6]);
    expect(t.bySegment.get('s2')).toEqual([7, 8]);
    expect([...t.calls].sort()).toEqual(['begin s1', 'begin s2', 'end s1', 'end s2']);
  });

  it('takes a stream whose end never came as ended a second after the next stream begins: it plays what it got, the next plays after it', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const t = started();
    const lost = liveStream('s1');
    t.send(AGENT, lost);
    lost.write(pcmBytes([1, 2]));
    await settle();
    const next = liveStream('s2');
    t.send(AGENT, next);
    next.write(pcmBytes([3, 4]));
    next.end();
    await settle();
    expect(t.calls).toEqual(['begin s1', 'begin s2', 'end s2']);
    vi.advanceTimersByTime(999);
    expect(t.calls).not.toContain('end s1');
    vi.advanceTimersByTime(1);
    await settle();
    expect(t.calls).toContain('end s1');
    expect(lost.closed()).toBe(true);
    expect(t.pushed).toEqual([1, 2, 3, 4]);
    // What still comes of it is not played.
    lost.write(pcmBytes([9, 9]));
    await settle();
    expect(t.pushed).toEqual([1, 2, 3, 4]);
  });

  it(`takes a stream that sends nothing for ${STREAM_IDLE_MS / 1000} s as ended, and no sooner`, async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const t = started();
    const lost = liveStream('s1');
    t.send(AGENT, lost);
    lost.write(pcmBytes([1, 2]));
    await settle();
    vi.advanceTimersByTime(STREAM_IDLE_MS - 1000);
    // Data re-arms the wait: a sender pausing between sentences keeps its stream.
    lost.write(pcmBytes([3, 4]));
    await settle();
    vi.advanceTimersByTime(STREAM_IDLE_MS - 1);
    expect(t.calls).toEqual(['begin s1']);
    vi.advanceTimersByTime(1);
    await settle();
    expect(t.calls).toEqual(['begin s1', 'end s1']);
    expect(t.pushed).toEqual([1, 2, 3, 4]);
  });

  it('tells the agent a segment finished with exactly the keys agents accept', () => {
    const t = started();
    t.receiver.onPlayoutEvent({ type: 'finished', segmentId: 's1', positionSeconds: 1.5, interrupted: true });
    expect(t.sent).toEqual([
      {
        method: RPC_PLAYBACK_FINISHED,
        payload: JSON.stringify({ playback_position: 1.5, interrupted: true, synchronized_transcript: null }),
      },
    ]);
  });

  it('stops telling an agent segments started once it does not support it', async () => {
    const t = started();
    t.failRpcsWith({ code: 1400 });
    t.receiver.onPlayoutEvent({ type: 'started', segmentId: 's1' });
    await settle();
    t.failRpcsWith(null);
    t.receiver.onPlayoutEvent({ type: 'started', segmentId: 's2' });
    t.receiver.onPlayoutEvent({ type: 'finished', segmentId: 's2', positionSeconds: 0, interrupted: false });
    expect(t.sent.map((s) => s.method)).toEqual([RPC_PLAYBACK_STARTED, RPC_PLAYBACK_FINISHED]);
  });

  it('sends nothing and takes no more streams once stopped', () => {
    const t = started();
    t.receiver.stop();
    t.receiver.onPlayoutEvent({ type: 'finished', segmentId: 's1', positionSeconds: 0, interrupted: false });
    expect(t.sent).toEqual([]);
    expect(t.byteHandlers.has(AUDIO_STREAM_TOPIC)).toBe(false);
    expect(t.rpcMethods.has(RPC_CLEAR_BUFFER)).toBe(false);
    expect(t.rpcMethods.has(RPC_PAUSE_SPEECH)).toBe(false);
  });
});
