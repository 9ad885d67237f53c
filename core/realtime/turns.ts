/**
 * Realtime turns (docs/realtime.md): prepare an avatar in this process's renderer, and run a turn,
 * `repeat` (speak the text) or `talk` (answer it through the LLM with the avatar's persona), as a
 * streamed AVMX mux lip-synced on the avatar's idle loop at its cursor.
 *
 * Billing: a turn reserves an estimate up front (402 before any byte), its usage row (kind `turn`)
 * goes reserved → started when the stream starts, and settles after the stream ends to the audio
 * actually handed to the connection (never above the reservation): `released`, or `failed` with 0
 * when it failed having delivered nothing. Progress is reported while it streams, so a crashed
 * process still bills what was delivered (the janitor settles at the last report).
 */
import { EventEmitter } from 'node:events';
import {
  estimateSpeechSeconds,
  isVoice,
  normalizeText,
  sentencesOf,
  splitSentences,
  synthesize,
  synthesizeSentences,
  VOICES,
  DEFAULT_VOICE,
  isTtsError,
  type FliteEngine,
  type Voice,
} from '../../render/tts/index.ts';
import { errorRecord } from '../../render/encode/index.ts';
import { TurnStream, type TurnError } from '../../render/turn/index.ts';
import type { Principal } from '../auth/key-store.ts';
import { loadAvatarPlayback, type AvatarPlayback } from '../avatars/playback.ts';
import type { Config } from '../platform/config.ts';
import { MICROS_PER_SECOND, type CreditLedger } from '../credits/ledger.ts';
import type { Sql } from '../platform/db/index.ts';
import { ApiError, notFound } from '../platform/errors.ts';
import type { Logger } from '../platform/log.ts';
import type { UsageStore } from '../usage.ts';
import type { ConversationStore, HistoryMessage } from './conversations.ts';
import { loopFrameAt } from './cursor.ts';
import { llmConfigured, type ChatMessage, type ChatModel } from './llm.ts';
import type { HeldMedia, RealtimeMedia } from './media.ts';
import { StreamSink, StreamStopped, type StopReason } from './sink.ts';

export const TURN_MODES = ['repeat', 'talk'] as const;
type TurnMode = (typeof TURN_MODES)[number];
/** Longest `text` of a turn, in characters. */
export const TURN_TEXT_MAX_CHARS = 2000;
/** How far the stream may run ahead of the client. */
const MAX_QUEUED_BYTES = 1 << 20;
/** How often a streaming turn reports what it delivered (and extends its reservation). */
const PROGRESS_EVERY_MS = 2_000;
/** Beyond its estimate, how long a turn's reservation lasts without a progress report. */
const RESERVATION_SLACK_SECONDS = 120;
/** JPEG quality of drawn frames. */
const JPEG_QUALITY = 80;

export interface TurnInput {
  avatarId: string;
  mode: TurnMode;
  text: string;
  conversationId?: string;
}

/** A turn past TurnService.check: its avatar is ready and its input can run. */
export interface CheckedTurn {
  principal: Principal;
  input: TurnInput;
  playback: AvatarPlayback & { loopCacheKey: string };
}

export interface StartedTurn {
  turnId: string;
  /** The mux, streamed. */
  body: ReadableStream<Uint8Array>;
}

/** How a turn ended, for logs, tests and benchmarks. */
export interface TurnSummary {
  turnId: string;
  tenantId: string;
  avatarId: string;
  mode: TurnMode;
  /** `completed`: END sent; `truncated`: cut at its reservation; `failed`: ERROR sent; or the client left. */
  outcome: 'completed' | 'truncated' | 'failed' | StopReason;
  error?: unknown;
  sampleRate: number;
  /** Audio synthesized and written to the stream, and the part handed to the connection. */
  speechSamples: number;
  deliveredAudioSamples: number;
  frames: number;
  drawnFrames: number;
  usage: { status: 'released' | 'failed'; billedCreditMicros: number } | undefined;
  /** Milliseconds from the start of the request to the first bytes (the header), the first audio and the first frame queued for the client. */
  first: { bytesMs?: number; audioMs?: number; frameMs?: number };
}

export interface PrepareAnswer {
  avatar_id: string;
  renderer_avatar_id: string;
  model_id: string;
  backend_id: string;
  status: 'ready';
  registered: boolean;
  source_kind: 'portrait';
  timings: Record<string, number>;
  /** The frame cache turns play (the idle loop). */
  video_cache: {
    clip_id: string;
    cache_version: number;
    fps: number;
    width: number;
    height: number;
    frames: number;
    codec: string;
    quality: number | null;
    bytes: number;
    digest: string;
  };
}

export interface TurnServiceDeps {
  sql: Sql;
  config: Config;
  usage: UsageStore;
  ledger: CreditLedger;
  media: RealtimeMedia;
  conversations: ConversationStore;
  log: Logger;
  /** The embedded TTS of turns (its own workers, so concurrent turns do not queue behind one). */
  tts: FliteEngine;
  chat?: ChatModel;
}

/** The Flite voice of an avatar: its defaultVoiceId when that names one, else the default voice. */
function voiceOf(playback: Pick<AvatarPlayback, 'defaultVoiceId'>): Voice {
  return playback.defaultVoiceId && isVoice(playback.defaultVoiceId) ? playback.defaultVoiceId : DEFAULT_VOICE;
}

/** The ERROR record of a failure inside a turn. */
function turnError(err: unknown): TurnError {
  if (err instanceof ApiError) return { code: err.code, message: err.message, retryable: err.retryable };
  if (isTtsError(err))
    return { code: 'internal_error', message: `Speech synthesis failed: ${err.message}`, retryable: true };
  return {
    code: 'internal_error',
    message: 'The turn failed: retry it, and quote the turn_id if it persists',
    retryable: true,
  };
}

interface PumpRun {
  principal: Principal;
  input: TurnInput;
  session: { sessionId: string; reservationId: string };
  held: HeldMedia;
  turn: TurnStream;
  sink: StreamSink;
  controller: AbortController;
  sampleRate: number;
  startedAt: number;
}

type Settled = { status: 'released' | 'failed'; billedCreditMicros: number } | undefined;

export class TurnService {
  /** Emits `ended` with a TurnSummary when a turn's stream is over and settled. */
  readonly events = new EventEmitter<{ ended: [TurnSummary] }>();
  private active = 0;

  constructor(private readonly d: TurnServiceDeps) {}

  /**
   * Settles the turn's usage to the delivered audio (`failed`, billing 0, when it failed having
   * delivered nothing) and records what was heard in its conversation.
   */
  private async settle(r: PumpRun, delivered: number, failedTurn: boolean): Promise<Settled> {
    const { log } = this.d;
    const id = r.session.sessionId;
    const failed = failedTurn && delivered === 0;
    const row = await this.d.usage
      .finish(
        id,
        failed
          ? { status: 'failed', billableMs: 0 }
          : { status: 'released', billableMs: (delivered * 1000) / r.sampleRate },
      )
      .catch((err: unknown) => {
        log.error({ err, turnId: id }, 'turn usage could not be settled');
        return undefined;
      });
    // The conversation keeps what the listener got: the user's text, and the sentences that began to play.
    if (r.input.conversationId) {
      const spoken = r.turn.stats.sentences
        .filter((s) => s.startSample < delivered)
        .map((s) => s.text)
        .join(' ');
      const messages: HistoryMessage[] = [];
      if (spoken) {
        if (r.input.mode === 'talk') messages.push({ role: 'user', content: r.input.text });
        messages.push({ role: 'assistant', content: spoken });
      }
      await this.d.conversations
        .append(r.principal.tenantId, r.input.avatarId, r.input.conversationId, messages)
        .catch((err: unknown) => log.warn({ err, turnId: id }, 'turn conversation could not be recorded'));
    }
    return row && (row.status === 'released' || row.status === 'failed')
      ? { status: row.status, billedCreditMicros: row.billedCreditMicros }
      : undefined;
  }

  /** The ERROR record's content for a client that stopped reading (the rest of its turn was dropped). */
  private stalled(): TurnError {
    const seconds = this.d.config.TURN_STALL_SECONDS;
    return {
      code: 'stream_stalled',
      message: `The client read nothing for ${seconds} s while the turn waited: the rest of it was dropped`,
      retryable: true,
    };
  }

  /** Turns streaming in this process now. */
  get activeTurns(): number {
    return this.active;
  }

  /** The avatar's playback plan, if it exists for the tenant and is ready for turns (404, 409 otherwise). */
  private async readyAvatar(tenantId: string, avatarId: string): Promise<AvatarPlayback & { loopCacheKey: string }> {
    const playback = await loadAvatarPlayback(this.d.sql, tenantId, avatarId);
    if (!playback) throw notFound(`Avatar ${avatarId}`);
    if (playback.status !== 'ready' || !playback.loopCacheKey) {
      throw new ApiError(
        'avatar_state_conflict',
        `Avatar ${avatarId} is not ready (status ${playback.status}): wait until GET /avatars/${avatarId} says ready`,
      );
    }
    return playback as AvatarPlayback & { loopCacheKey: string };
  }

  /** POST /realtime/prepare: the avatar's media open in this process's renderer, its voice warm. */
  async prepare(principal: Principal, avatarId: string): Promise<PrepareAnswer> {
    const t0 = performance.now();
    const playback = await this.readyAvatar(principal.tenantId, avatarId);
    await this.d.ledger.assertSpendable(principal.tenantId, principal.apiKeyId);
    const [{ model_id: modelId } = { model_id: 'builtin-rig-v1' }] = await this.d.sql<
      { model_id: string }[]
    >`select model_id from avatars where id = ${avatarId}`;
    const tEngine = performance.now();
    const backendId = await this.d.media.backendId();
    const engineMs = performance.now() - tEngine;
    const held = await this.d.media.acquire(playback.loopCacheKey);
    try {
      const tTts = performance.now();
      await this.d.tts.warmUp();
      await synthesize({ text: 'Hello.', voice: voiceOf(playback) }, this.d.tts);
      const ttsMs = performance.now() - tTts;
      const m = held.body.cache.manifest;
      const last = m.frames[m.frameCount - 1]!;
      const ms = (v: number) => Math.round(v * 10) / 10;
      return {
        avatar_id: avatarId,
        renderer_avatar_id: `${avatarId}:${playback.cacheVersion}`,
        model_id: modelId,
        backend_id: backendId,
        status: 'ready',
        registered: held.loaded,
        source_kind: 'portrait',
        timings: { engine_ms: ms(engineMs), ...held.timings, tts_ms: ms(ttsMs), total_ms: ms(performance.now() - t0) },
        video_cache: {
          clip_id: 'source',
          cache_version: playback.cacheVersion,
          fps: m.fps,
          width: m.width,
          height: m.height,
          frames: m.frameCount,
          codec: m.codec,
          quality: m.quality ?? null,
          bytes: last[0] + last[1] + m.frameCount * m.landmarkCount * 12,
          digest: m.hash,
        },
      };
    } finally {
      held.release();
    }
  }

  /**
   * POST /realtime/turn, first step: the refusals that need no resource (404, 409 avatar not ready,
   * 422, 503 llm_not_configured). The API claims the turn's Idempotency-Key after them.
   */
  async check(principal: Principal, input: TurnInput): Promise<CheckedTurn> {
    const playback = await this.readyAvatar(principal.tenantId, input.avatarId);
    if (input.mode === 'repeat' && !/[A-Za-z0-9]/.test(normalizeText(input.text))) {
      throw new ApiError(
        'validation_error',
        'Invalid field "text" in body: it has nothing to speak (no letters or digits once folded to ASCII)',
        { field: 'text' },
      );
    }
    if (input.mode === 'talk' && (!this.d.chat || !llmConfigured(this.d.config))) {
      throw new ApiError(
        'llm_not_configured',
        'Talk turns need an LLM: set OPENAI_BASE_URL (an OpenAI-compatible endpoint) and/or OPENAI_API_KEY, or use mode "repeat"',
      );
    }
    return { principal, input, playback };
  }

  /**
   * POST /realtime/turn, second step: everything else that can refuse the turn happens here, before
   * a byte is sent (402, 502, 504); `started` runs once the turn is sure to stream (its usage
   * started), and a throw there refuses it too; the returned body then streams the mux. `signal` is
   * the request's (aborted when the client leaves before the stream starts).
   */
  async start(
    { principal, input, playback }: CheckedTurn,
    opts: {
      started?: (turnId: string) => Promise<void>;
      signal?: AbortSignal;
      startedAt?: number;
      dropConnection?: () => void;
    } = {},
  ): Promise<StartedTurn> {
    const startedAt = opts.startedAt ?? performance.now();
    const { config, usage, log } = this.d;
    const voice = voiceOf(playback);
    const sampleRate = VOICES[voice].sampleRate;
    // The most speech this turn may carry: an upper bound of the text's speech, or the talk cap.
    const seconds = input.mode === 'repeat' ? estimateSpeechSeconds(input.text) : config.TURN_TALK_MAX_SECONDS;
    const reservedMs = Math.ceil(seconds * 1000);
    const maxSamples = Math.floor((reservedMs * sampleRate) / 1000);
    const controller = new AbortController();
    const onAbort = () => controller.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    let session: { sessionId: string; reservationId: string } | undefined;
    let held: HeldMedia | undefined;
    try {
      session = await usage.open({
        tenantId: principal.tenantId,
        apiKeyId: principal.apiKeyId,
        kind: 'turn',
        avatarId: input.avatarId,
        reserveCreditMicros: reservedMs * (MICROS_PER_SECOND / 1000),
        ttlSeconds: Math.ceil(seconds) + RESERVATION_SLACK_SECONDS,
      });
      held = await this.d.media.acquire(playback.loopCacheKey);
      const lipsync = await this.d.media.lipsync();
      let history: HistoryMessage[] = [];
      let sentences: AsyncIterable<string> | Iterable<string>;
      if (input.mode === 'talk') {
        if (input.conversationId)
          history = await this.d.conversations.history(principal.tenantId, input.avatarId, input.conversationId);
        const messages: ChatMessage[] = [
          { role: 'system', content: playback.instructions },
          ...history,
          { role: 'user', content: input.text },
        ];
        // Waits for the first text of the answer: an LLM that fails now is an error answer, not a stream.
        sentences = sentencesOf(await this.d.chat!.open(messages, controller.signal));
      } else {
        sentences = splitSentences(normalizeText(input.text));
      }
      await usage.start(session.sessionId);
      await opts.started?.(session.sessionId);
      opts.signal?.removeEventListener('abort', onAbort);

      const body = held.body;
      const clockMs = Date.now();
      const startFrame = loopFrameAt(clockMs, body.fps, body.frameCount);
      const turn = new TurnStream({
        body,
        startFrame,
        lipsync,
        speech: synthesizeSentences(sentences, { voice }, this.d.tts),
        sampleRate,
        maxSamples,
        jpegQuality: JPEG_QUALITY,
        metadata: {
          turn_id: session.sessionId,
          avatar_id: input.avatarId,
          mode: input.mode,
          voice,
          ...(input.conversationId ? { conversation_id: input.conversationId } : {}),
          cursor: {
            clip_id: 'source',
            frame: startFrame,
            frame_count: body.frameCount,
            fps: body.fps,
            clock_ms: clockMs,
          },
        },
        describeError: turnError,
      });
      const sink = new StreamSink({
        maxQueuedBytes: MAX_QUEUED_BYTES,
        stallMs: this.d.config.TURN_STALL_SECONDS * 1000,
        onStop: () => controller.abort(),
        ...(opts.dropConnection ? { onAbandon: opts.dropConnection } : {}),
      });
      const run = { principal, input, session, held, turn, sink, controller, sampleRate, startedAt };
      this.active++;
      void this.pump(run).finally(() => this.active--);
      return { turnId: session.sessionId, body: sink.readable };
    } catch (err) {
      controller.abort();
      opts.signal?.removeEventListener('abort', onAbort);
      held?.release();
      if (session)
        await usage
          .finish(session.sessionId, { status: 'failed', billableMs: 0 })
          .catch((e: unknown) => log.error({ err: e }, 'turn usage could not be settled'));
      throw err;
    }
  }

  /**
   * Streams the turn into its sink. Its usage is settled and its conversation recorded before the
   * END (or ERROR) record is handed over, so a client that has read the end of a turn finds both
   * done; a client that left is settled once the stream stopped.
   */
  private async pump(r: PumpRun): Promise<void> {
    const { turn, sink, sampleRate, session } = r;
    const { ledger, log } = this.d;
    const first: TurnSummary['first'] = {};
    let lastReport = performance.now();
    let broken: unknown;
    let settled: Settled | null = null;
    /** The stream's HEADER record (its first chunk): an ERROR record alone would not be a stream. */
    let header: Uint8Array | undefined;
    try {
      for await (const chunk of turn.chunks()) {
        header ??= chunk.bytes;
        if (chunk.final) {
          await sink.drained();
          settled = await this.settle(r, sink.deliveredAudioSamples, turn.stats.outcome === 'error');
        }
        await sink.write(chunk.bytes, { audioSamples: chunk.audioSamples });
        const at = performance.now() - r.startedAt;
        first.bytesMs ??= at;
        if (chunk.audioSamples > 0) first.audioMs ??= at;
        if (chunk.videoFrames > 0) first.frameMs ??= at;
        if (performance.now() - lastReport > PROGRESS_EVERY_MS) {
          lastReport = performance.now();
          const micros = Math.round((sink.deliveredAudioSamples * MICROS_PER_SECOND) / sampleRate);
          ledger
            .reportProgress(session.reservationId, micros, RESERVATION_SLACK_SECONDS)
            .catch((err: unknown) => log.warn({ err }, 'turn progress could not be reported'));
        }
      }
      await sink.close();
    } catch (err) {
      if (!(err instanceof StreamStopped)) {
        broken = err;
        log.error({ err, turnId: session.sessionId }, 'turn stream failed');
      }
      // The mux's own ERROR record ends what the client may still read (nothing once it left). A
      // stall dropped what waited, the HEADER too if the client took nothing: it goes first then.
      const stopped = err instanceof StreamStopped;
      const e = stopped ? this.stalled() : turnError(err);
      const last = errorRecord(e.code, e.message, { retryable: e.retryable });
      sink.end(stopped && header && sink.deliveredBytes === 0 ? concatBytes(header, last) : last);
    } finally {
      r.controller.abort();
      r.held.release();
    }
    const delivered = sink.deliveredAudioSamples;
    if (settled === null)
      settled = await this.settle(r, delivered, turn.stats.outcome === 'error' || broken !== undefined);

    const stats = turn.stats;
    const summary: TurnSummary = {
      turnId: session.sessionId,
      tenantId: r.principal.tenantId,
      avatarId: r.input.avatarId,
      mode: r.input.mode,
      outcome:
        sink.stopped ??
        (broken !== undefined || stats.outcome === 'error'
          ? 'failed'
          : stats.outcome === 'truncated'
            ? 'truncated'
            : 'completed'),
      ...(broken !== undefined || stats.error !== undefined ? { error: broken ?? stats.error } : {}),
      sampleRate,
      speechSamples: stats.audioSamples,
      deliveredAudioSamples: delivered,
      frames: stats.frames,
      drawnFrames: stats.drawnFrames,
      usage: settled,
      first,
    };
    log.info(
      {
        turnId: summary.turnId,
        avatarId: summary.avatarId,
        mode: summary.mode,
        outcome: summary.outcome,
        seconds: delivered / sampleRate,
        frames: summary.frames,
        billedCreditMicros: summary.usage?.billedCreditMicros,
      },
      'turn ended',
    );
    this.events.emit('ended', summary);
  }
}

function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
