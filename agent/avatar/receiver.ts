/**
 * LiveKit's avatar protocol, the avatar's side (as LiveKit's own avatar runners speak it):
 *
 * - the agent's speech arrives on `lk.audio_stream` byte streams: one stream per segment, raw
 *   int16 little-endian PCM, attributes `sample_rate` and `num_channels`, closed at the segment's end;
 * - RPC `lk.clear_buffer` (agent → avatar): stop now (barge-in);
 * - and ours (agent/protocol.ts), for our own voice agent: `avatar.pause_speech` holds the speech
 *   where it is, `avatar.resume_speech` plays it on (an interruption that was noise);
 * - RPC `lk.playback_finished` (avatar → agent): once per stream, `{ playback_position, interrupted,
 *   synchronized_transcript }` (exactly those keys: Python agents refuse any other);
 * - RPC `lk.playback_started` (avatar → agent): a segment's first sample is playing. Agents that
 *   did not ask for it answer UNSUPPORTED_METHOD; the receiver then stops sending it to them.
 *
 * Only the agent this avatar speaks for may send audio or clear; anything else is refused. A
 * stream it cannot use (bad attributes, too many at once) is still answered, as played at 0, so
 * the agent never waits on it. Audio beyond what the playout holds at once (its
 * `maxBufferedSamples`) is dropped: that stream stops being read and plays what it got.
 *
 * `lk.clear_buffer` is answered "ok" whatever plays, nothing included: some senders wait for that
 * answer before they go on. A stream whose end never arrives (its trailer lost, a sender gone
 * mid-segment) would hold every later segment behind it and leave its agent waiting for
 * `lk.playback_finished` for ever: it is taken as ended soon after the agent opens its next
 * stream (senders send one segment at a time, and the data channel keeps their order, so no more of
 * it can come; what arrived is still read, for a second), or after `streamIdleMs` without data.
 */
import {
  AudioFrame,
  AudioResampler,
  type ByteStreamReader,
  type Room,
  type RpcInvocationData,
} from '@livekit/rtc-node';
import type { Logger } from '../../core/platform/log.ts';
import { RPC_PAUSE_SPEECH, RPC_RESUME_SPEECH } from '../protocol.ts';
import type { PlayoutEvent, SpeechPlayout } from './playout.ts';

export const AUDIO_STREAM_TOPIC = 'lk.audio_stream';
export const RPC_CLEAR_BUFFER = 'lk.clear_buffer';
export const RPC_PLAYBACK_FINISHED = 'lk.playback_finished';
export const RPC_PLAYBACK_STARTED = 'lk.playback_started';
/** rtc-node's RpcError code for a method the other side did not register. */
const UNSUPPORTED_METHOD = 1400;

/**
 * Streams agents send the whole room (before they link to their user): their session events and
 * transcripts. Not for the avatar: read and dropped quietly (unhandled, rtc-node warns on each).
 */
const IGNORED_BYTE_TOPICS = ['lk.agent.session'];
const IGNORED_TEXT_TOPICS = ['lk.transcription', 'lk.chat'];

/** Segments queued at once beyond which new streams are answered at once and dropped. */
export const MAX_PENDING_SEGMENTS = 32;

/**
 * How long a stream may go without data before its end is taken as lost. agents-js closes its own
 * stream after 10 s without TTS audio (its forwardAudioIdleTimeout), so a live sender never comes near.
 */
export const STREAM_IDLE_MS = 15_000;
/**
 * How long a stream still open when the next one begins is read on: its data arrived before the
 * next stream's header, and may only wait in the reader's queue (an event loop stalled a while).
 */
const NEXT_STREAM_GRACE_MS = 1000;

export interface AudioReceiverOptions {
  room: Room;
  playout: SpeechPlayout;
  /** The identity of the agent this avatar speaks for: the only sender accepted. */
  senderIdentity: string;
  log: Logger;
  /** A stream without data this long is taken as ended (its end marker lost); default STREAM_IDLE_MS. */
  streamIdleMs?: number;
}

interface StreamFormat {
  sampleRate: number;
  channels: number;
}

function parseFormat(attributes: Record<string, string> | undefined): StreamFormat | undefined {
  const sampleRate = Number(attributes?.sample_rate);
  const channels = Number(attributes?.num_channels ?? '1');
  if (!Number.isInteger(sampleRate) || sampleRate < 8000 || sampleRate > 48_000) return undefined;
  if (channels !== 1 && channels !== 2) return undefined;
  return { sampleRate, channels };
}

interface OpenStream {
  reader: ByteStreamReader;
  idle: NodeJS.Timeout | null;
  /** How long it may go without data before its end is taken as lost, and why. */
  idleMs: number;
  why: 'next stream' | 'idle';
}

export class AvatarAudioReceiver {
  private readonly log: Logger;
  private startedUnsupported = false;
  private pending = 0;
  private closed = false;
  /** Streams still being read, by id: ended early when their end is taken as lost. */
  private readonly open = new Map<string, OpenStream>();

  constructor(private readonly o: AudioReceiverOptions) {
    this.log = o.log;
  }

  start(): void {
    const { room } = this.o;
    room.registerByteStreamHandler(AUDIO_STREAM_TOPIC, (reader, { identity }) => {
      void this.receive(reader, identity).catch((err: unknown) => this.log.warn({ err }, 'audio stream failed'));
    });
    for (const topic of IGNORED_BYTE_TOPICS)
      room.registerByteStreamHandler(topic, (reader) => void reader.readAll().catch(() => {}));
    for (const topic of IGNORED_TEXT_TOPICS)
      room.registerTextStreamHandler(topic, (reader) => void reader.readAll().catch(() => {}));
    room.localParticipant!.registerRpcMethod(RPC_CLEAR_BUFFER, async (data: RpcInvocationData) => {
      if (data.callerIdentity !== this.o.senderIdentity) return 'reject';
      try {
        this.o.playout.interrupt();
      } catch (err) {
        // Answered all the same: a sender waiting on the answer must not hang on our failure.
        this.log.warn({ err }, 'clearing the playout failed');
      }
      return 'ok';
    });
    // Ours (agent/protocol.ts), beside LiveKit's: a held speech, for an interruption that may be noise.
    const hold = (method: string, act: () => void) =>
      room.localParticipant!.registerRpcMethod(method, async (data: RpcInvocationData) => {
        if (data.callerIdentity !== this.o.senderIdentity) return 'reject';
        act();
        return 'ok';
      });
    hold(RPC_PAUSE_SPEECH, () => this.o.playout.pause());
    hold(RPC_RESUME_SPEECH, () => this.o.playout.resume());
  }

  stop(): void {
    this.closed = true;
    for (const id of [...this.open.keys()]) this.endLost(id, 'call ending');
    try {
      this.o.room.unregisterByteStreamHandler(AUDIO_STREAM_TOPIC);
      for (const method of [RPC_CLEAR_BUFFER, RPC_PAUSE_SPEECH, RPC_RESUME_SPEECH])
        this.o.room.localParticipant?.unregisterRpcMethod(method);
    } catch {
      // The room is already gone.
    }
  }

  /** Playout events become the protocol's RPCs to the sender. */
  onPlayoutEvent(event: PlayoutEvent): void {
    if (this.closed) return;
    if (event.type === 'finished') {
      this.pending = Math.max(0, this.pending - 1);
      const payload = JSON.stringify({
        playback_position: event.positionSeconds,
        interrupted: event.interrupted,
        synchronized_transcript: null,
      });
      this.rpc(RPC_PLAYBACK_FINISHED, payload);
    } else if (!this.startedUnsupported) {
      this.rpc(RPC_PLAYBACK_STARTED, '');
    }
  }

  private rpc(method: string, payload: string): void {
    const lp = this.o.room.localParticipant;
    if (!lp || !this.o.room.isConnected) return;
    lp.performRpc({ destinationIdentity: this.o.senderIdentity, method, payload, responseTimeout: 5000 }).catch(
      (err: { code?: number }) => {
        if (method === RPC_PLAYBACK_STARTED && err?.code === UNSUPPORTED_METHOD) {
          this.startedUnsupported = true;
          return;
        }
        this.log.warn({ err, method }, 'avatar protocol rpc failed');
      },
    );
  }

  /**
   * A stream whose end is taken as lost: it plays what it got and is answered as any other; what
   * still arrives for it is dropped.
   */
  private endLost(id: string, why: 'next stream' | 'idle' | 'call ending'): void {
    const s = this.open.get(id);
    if (!s) return;
    this.open.delete(id);
    if (s.idle) clearTimeout(s.idle);
    if (why !== 'call ending') this.log.warn({ streamId: id, why }, 'audio stream ended without its end marker');
    this.o.playout.end(id);
    void s.reader.close();
  }

  /** (Re)arms the idle timer of an open stream. */
  private touch(id: string): void {
    const s = this.open.get(id);
    if (!s) return;
    if (s.idle) clearTimeout(s.idle);
    s.idle = setTimeout(() => this.endLost(id, s.why), s.idleMs);
    s.idle.unref?.();
  }

  private async receive(reader: ByteStreamReader, identity: string): Promise<void> {
    const id = reader.info.streamId;
    // Stops reading a stream we do not use: what else arrives for it is dropped as it comes.
    const discard = () => reader.close();
    if (identity !== this.o.senderIdentity) {
      this.log.warn({ identity }, 'audio stream from a participant this avatar does not speak for, ignored');
      return discard();
    }
    // A sender opens its next segment only after closing the last: one still open has lost its end,
    // unless its last chunks and end still wait in its reader's queue.
    for (const [open, s] of this.open) {
      s.idleMs = Math.min(s.idleMs, NEXT_STREAM_GRACE_MS);
      s.why = 'next stream';
      this.touch(open);
    }
    const { playout } = this.o;
    const format = parseFormat(reader.info.attributes);
    this.pending++;
    playout.begin(id);
    if (!format || this.pending > MAX_PENDING_SEGMENTS || this.closed) {
      if (!format)
        this.log.warn(
          { attributes: reader.info.attributes },
          'audio stream with unusable attributes, answered as played',
        );
      playout.end(id); // empty: finishes at once
      return discard();
    }
    const resampler =
      format.sampleRate !== playout.sampleRate ? new AudioResampler(format.sampleRate, playout.sampleRate, 1) : null;
    let carry: Uint8Array | null = null;
    const frameBytes = 2 * format.channels;
    /** False once the playout dropped audio of this stream (it holds all it may). */
    const pushPcm = (pcm: Int16Array): boolean => {
      if (pcm.length === 0) return true;
      if (!resampler) return playout.push(id, pcm);
      return resampler
        .push(new AudioFrame(pcm, format.sampleRate, 1, pcm.length))
        .every((f) => playout.push(id, f.data));
    };
    this.open.set(id, { reader, idle: null, idleMs: this.o.streamIdleMs ?? STREAM_IDLE_MS, why: 'idle' });
    this.touch(id);
    try {
      for await (const chunk of reader) {
        if (!this.open.has(id)) break;
        this.touch(id);
        let bytes = chunk;
        if (carry) {
          bytes = new Uint8Array(carry.length + chunk.length);
          bytes.set(carry);
          bytes.set(chunk, carry.length);
          carry = null;
        }
        const whole = bytes.length - (bytes.length % frameBytes);
        if (whole < bytes.length) carry = bytes.slice(whole);
        if (whole === 0) continue;
        // Copied into an aligned buffer (chunks may start at any byte offset).
        const samples = new Int16Array(bytes.slice(0, whole).buffer);
        if (!pushPcm(format.channels === 1 ? samples : downmix(samples))) {
          this.log.warn(
            { streamId: id, seconds: playout.bufferedSeconds },
            'audio stream over what the avatar holds at once, the rest dropped',
          );
          await discard();
          return;
        }
      }
      if (resampler && this.open.has(id)) for (const f of resampler.flush()) playout.push(id, f.data);
    } finally {
      resampler?.close();
      // Unless its end was taken as lost already (endLost ended it).
      const s = this.open.get(id);
      if (s) {
        if (s.idle) clearTimeout(s.idle);
        this.open.delete(id);
        playout.end(id);
      }
    }
  }
}

function downmix(stereo: Int16Array): Int16Array {
  const mono = new Int16Array(stereo.length >> 1);
  for (let i = 0; i < mono.length; i++) mono[i] = (stereo[2 * i]! + stereo[2 * i + 1]!) >> 1;
  return mono;
}
