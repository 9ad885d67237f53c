/**
 * The voice of a conversation-mode call, in an agents-js job process (one per call): it hears the
 * user (Silero VAD, STT), thinks (the LLM, with the avatar's persona as instructions and its
 * actions as tools) and speaks (TTS) through LiveKit's avatar protocol to the call's avatar, which
 * the worker's main process renders and publishes. Transcriptions reach the room the LiveKit way,
 * paced by the avatar's playback events.
 *
 * Provider-mode calls need no job here: the avatar alone joins, and speaks for another agent.
 */
import { AutoSubscribe, defineAgent, stt, voice, type JobContext, type JobProcess, type VAD } from '@livekit/agents';
import * as openai from '@livekit/agents-plugin-openai';
import * as silero from '@livekit/agents-plugin-silero';
import { ParticipantKind, TrackKind, type AudioFrame } from '@livekit/rtc-node';
import OpenAI from 'openai';
import { createReactionPicker } from '../../clips/behavior/index.ts';
import { loadAvatarPlayback } from '../../core/avatars/playback.ts';
import { loadConfig, type Config } from '../../core/platform/config.ts';
import { CreditLedger } from '../../core/credits/ledger.ts';
import { openConnections, openDatabase, type Database } from '../../core/platform/db/index.ts';
import { LiveSessionStore } from '../../core/live/sessions.ts';
import { createLogger, type Logger } from '../../core/platform/log.ts';
import { stallGuardedFetch } from '../../core/platform/net/stall-guard.ts';
import { UsageStore } from '../../core/usage.ts';
import { RPC_CALL_ENDED, RPC_PAUSE_SPEECH, RPC_RESUME_SPEECH, RPC_USER_SPEECH_STARTED } from '../protocol.ts';
import { shapeAgentsLog } from '../agents-logs.ts';
import { quietRtcLogs } from '../rtc-logs.ts';
import { resubscribeStalledTracks } from '../stalled-tracks.ts';
import { actionTools } from './actions.ts';
import { sayGreeting, synthesizeAhead } from './greeting.ts';
import { ttsFor } from './tts.ts';
import { GatedVAD, TurnGate } from './end-of-turn.ts';
import { INTERRUPTION, sileroMinSilence, turnSilences } from './turns.ts';
import { takeUserAudioInFrames, USER_AUDIO_SAMPLE_RATE } from './user-audio.ts';
import { warmReplyPath, warmVad, warmVoice } from './warm.ts';

/** What a dispatch carries (set by the session mint). */
export interface DispatchMetadata {
  session_id: string;
}

/** Retries of the STT and LLM: one, quickly (a call cannot wait on a model for long). */
const UPSTREAM_RETRY = { maxRetry: 1, retryIntervalMs: 500 };
/** How long a resume waits for a clear that may follow it (TimedAudioOutput.resume). */
const RESUME_AFTER_MS = 50;
/** What the avatar says when its LLM could not answer a turn. */
export const LLM_FAILED_LINE = "Sorry, I can't answer that right now.";

interface ProcessState {
  config: Config;
  log: Logger;
  db: Database;
  vad: VAD;
  sttVad: VAD;
  silences: ReturnType<typeof turnSilences>;
  /** The process's first runs (VAD, TTS) done. */
  warmed: Promise<void>;
}

/**
 * The OpenAI-compatible endpoint as the call's STT or LLM reaches it: no request waits longer than
 * `timeoutSeconds` for an answer to begin, nor for its next byte once it streams (a model that
 * stalls mid-answer would otherwise hold the call's turn forever). Retries are the voice
 * pipeline's, not the SDK's.
 */
function upstreamClient(config: Config, timeoutSeconds: number, baseURL = config.OPENAI_BASE_URL): OpenAI {
  return new OpenAI({
    apiKey: config.OPENAI_API_KEY ?? 'unused',
    ...(baseURL ? { baseURL } : {}),
    maxRetries: 0,
    timeout: timeoutSeconds * 1000,
    fetch: stallGuardedFetch(timeoutSeconds * 1000),
  });
}

/**
 * When each stage of a reply happened (wall clock, ms), logged once per reply as `reply timings`
 * when its audio starts playing at the avatar: the VAD's end of the user's speech, the transcript,
 * the end of the turn, the first TTS audio sent to the avatar, and its playback start there. What
 * `npm run bench -- conversation` reads to say where a reply's time goes (docs/agent.md).
 */
class ReplyTimings {
  private turn: Record<string, number> = {};

  constructor(private readonly log: Logger) {}

  mark(stage: string, at = Date.now()): void {
    this.turn[stage] ??= at;
  }

  watch(session: voice.AgentSession): void {
    session.on(voice.AgentSessionEventTypes.UserStateChanged, (ev) => {
      // The user speaks again: a new turn (a pause inside an utterance included).
      if (ev.newState === 'speaking') this.turn = {};
      else if (ev.oldState === 'speaking') this.turn.vadEndAt = ev.createdAt;
    });
    session.on(voice.AgentSessionEventTypes.UserInputTranscribed, (ev) => {
      if (ev.isFinal) this.turn.transcriptAt = ev.createdAt;
    });
    session.on(voice.AgentSessionEventTypes.MetricsCollected, (ev) => {
      if (ev.metrics.type !== 'eou_metrics') return;
      this.turn.turnEndAt = Date.now();
      this.turn.endOfUtteranceDelayMs = Math.round(ev.metrics.endOfUtteranceDelayMs);
      this.turn.transcriptionDelayMs = Math.round(ev.metrics.transcriptionDelayMs);
      // One line per user turn (no words: what the user says is not logged), whether or not a reply plays.
      this.log.info({ turnEndAt: this.turn.turnEndAt, silenceMs: this.turn.endOfUtteranceDelayMs }, 'user turn ended');
    });
    session.on(voice.AgentSessionEventTypes.AgentStateChanged, (ev) => {
      if (ev.newState !== 'speaking') return;
      // A reply of a turn (the greeting or an apology has none): its audio plays at the avatar now.
      if (this.turn.turnEndAt !== undefined) this.log.info({ ...this.turn, playbackAt: ev.createdAt }, 'reply timings');
      this.turn = {};
    });
  }
}

/** The STT, telling the turn's gate which transcriptions are out and what the last one said. */
class GatedSTT extends openai.STT {
  /** What a backchannel is transcribed as: no words. */
  private readonly none: stt.SpeechEvent;

  constructor(
    private readonly gate: TurnGate,
    opts: ConstructorParameters<typeof openai.STT>[0] & { language: string },
  ) {
    super(opts);
    const language = opts.language as stt.SpeechData['language'];
    this.none = {
      type: stt.SpeechEventType.FINAL_TRANSCRIPT,
      alternatives: [{ text: '', language, startTime: 0, endTime: 0, confidence: 0 }],
    };
  }

  override _recognize(...args: Parameters<openai.STT['_recognize']>): ReturnType<openai.STT['_recognize']> {
    return this.gate.transcribe(
      () => super._recognize(...args),
      () => this.none,
    );
  }
}

/**
 * The avatar protocol's sender, noting when a reply's first audio goes out; and one that can hold
 * a reply at the avatar (our RPCs), so that agents-js resumes a reply the user interrupted with a
 * noise (no words) rather than drop it.
 */
class TimedAudioOutput extends voice.DataStreamAudioOutput {
  private segmentStarted = false;
  /** The avatar holds the reply (told to pause, not yet to resume or clear). */
  private held = false;
  private resumeTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly timings: ReplyTimings,
    private readonly log: Logger,
    private readonly opts: ConstructorParameters<typeof voice.DataStreamAudioOutput>[0],
    /** The avatar has ended the call: nothing is told it any more (this process is leaving the room). */
    private readonly call: { ended: boolean },
  ) {
    super(opts);
  }

  override get canPause(): boolean {
    return true;
  }

  /** agents-js calls pause on every VAD report while the user speaks over the avatar: told once. */
  override pause(): void {
    this.cancelResume();
    if (this.held) return;
    this.held = true;
    this.tell(RPC_PAUSE_SPEECH);
  }

  /**
   * agents-js resumes the output as it interrupts a held reply (the user's words came), a moment
   * before it clears it: told a little later, and not at all when the clear comes first, or the
   * avatar would play on for that moment.
   */
  override resume(): void {
    if (!this.held || this.resumeTimer) return;
    this.resumeTimer = setTimeout(() => {
      this.resumeTimer = undefined;
      this.held = false;
      this.tell(RPC_RESUME_SPEECH);
    }, RESUME_AFTER_MS);
  }

  private cancelResume(): void {
    clearTimeout(this.resumeTimer);
    this.resumeTimer = undefined;
  }

  private tell(method: string): void {
    if (this.call.ended) return;
    this.opts.room.localParticipant
      ?.performRpc({ destinationIdentity: this.opts.destinationIdentity, method, payload: '', responseTimeout: 2000 })
      .catch((err: unknown) => this.log.debug({ err, method }, 'could not tell the avatar'));
  }

  override async captureFrame(frame: AudioFrame): Promise<void> {
    if (!this.segmentStarted) this.timings.mark('ttsFirstAudioAt');
    this.segmentStarted = true;
    await super.captureFrame(frame);
  }

  override flush(): void {
    this.segmentStarted = false;
    super.flush();
  }

  override clearBuffer(): void {
    // The avatar's clear ends a hold too.
    this.cancelResume();
    this.held = false;
    this.segmentStarted = false;
    // Sent as the session closes, an RPC to an avatar that has ended the call failed to publish on
    // this process's closing connection, and LiveKit's Rust SDK logged it at error level.
    if (this.call.ended) return;
    super.clearBuffer();
  }
}

export function parseDispatchMetadata(raw: string): DispatchMetadata | undefined {
  try {
    const v = JSON.parse(raw) as Partial<DispatchMetadata>;
    return typeof v.session_id === 'string' && /^ses_[0-9A-Za-z]{1,64}$/.test(v.session_id)
      ? { session_id: v.session_id }
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * agents-js 1.9 answers its parent's shutdown request only once the process is initialised (after
 * `prewarm`): a worker stopping while this process still boots (a warm spare it just forked) would
 * wait a minute for an answer, then kill it and log an error. Until then nothing runs here, so a
 * shutdown request is answered by leaving at once.
 */
const leaveOnEarlyShutdown = (m: unknown) => {
  if ((m as { case?: string } | null)?.case === 'shutdownRequest') process.exit(0);
};
if (process.send) process.on('message', leaveOnEarlyShutdown);

export default defineAgent({
  // Once per job process, before it takes a call: the WebRTC engine's log capture off, the VAD model and a small database pool.
  prewarm: async (proc: JobProcess) => {
    const config = loadConfig();
    quietRtcLogs(config.LOG_LEVEL);
    shapeAgentsLog({ transcripts: config.LOG_TRANSCRIPTS });
    const log = createLogger(config.LOG_LEVEL).child({ component: 'voice' });
    const db = await openDatabase({ ...config, DATABASE_POOL_SIZE: 2 }, log);
    await openConnections(db.sql, 2);
    // Two VADs on the user's audio, each counting silence in the audio itself (a busy machine
    // that reads it late moves neither): the STT's, which sends the speech so far to STT after
    // AGENT_STT_SILENCE_MS, and the turn's, a little later, which weighs whether the turn is over
    // (turns.ts): the transcript, and the reply made from it, are ready when it ends.
    const silences = turnSilences({
      sttSilenceMs: config.AGENT_STT_SILENCE_MS,
      questionMs: config.AGENT_QUESTION_TURN_MS,
      finishedMs: config.AGENT_FINISHED_TURN_MS,
      openMs: config.AGENT_TURN_END_MS,
    });
    const vad = await silero.VAD.load({ minSilenceDuration: sileroMinSilence(silences.vadSilenceMs) });
    const sttVad = await silero.VAD.load({ minSilenceDuration: sileroMinSilence(config.AGENT_STT_SILENCE_MS) });
    // A call's first reply must not pay for the first runs: the VAD models' first inferences, the
    // embedded TTS's start (its thread, its WebAssembly, a first synthesis: 0.7 s more on a first
    // reply), and the code of a reply (warm.ts: fetch, the models' clients, the TTS's stream).
    // Not awaited: agents-js gives a process 10 s to initialise, which a loaded machine can overrun;
    // the process is idle until a call comes, and a call waits for it only before its greeting.
    const t0 = performance.now();
    const embeddedClauses = !config.TTS_MODEL && config.AGENT_TTS_CLAUSES;
    const warmed = Promise.all([
      warmVad(vad),
      warmVad(sttVad),
      (config.TTS_MODEL ? Promise.resolve() : warmVoice()).then(() =>
        warmReplyPath(
          (baseURL) => upstreamClient(config, 10, baseURL),
          embeddedClauses ? ttsFor(config, null) : undefined,
        ),
      ),
    ]).then(
      () => log.info({ warmMs: Math.round(performance.now() - t0) }, 'voice process ready'),
      (err: unknown) => log.warn({ err }, 'could not warm the voice pipeline'),
    );
    proc.userData.state = { config, log, db, vad, sttVad, silences, warmed } satisfies ProcessState;
    // From here agents-js's own handler answers shutdown requests (gracefully, a call in progress included).
    process.off('message', leaveOnEarlyShutdown);
  },

  entry: async (ctx: JobContext) => {
    const { config, log: plog, db, vad, sttVad, silences, warmed } = ctx.proc.userData.state as ProcessState;
    const meta = parseDispatchMetadata(ctx.job.metadata);
    const log = plog.child({ sessionId: meta?.session_id, room: ctx.job.room?.name });
    if (!meta) {
      log.warn('dispatch without a session id, nothing to do');
      return;
    }
    const sessions = new LiveSessionStore(db.sql, new UsageStore(db.sql, new CreditLedger(db.sql)));
    const session = await sessions.get(meta.session_id);
    if (!session || session.mode !== 'conversation' || session.state === 'ended') return;
    const playback = await loadAvatarPlayback(db.sql, session.tenantId, session.avatarId);
    if (!playback) return;
    if (!config.OPENAI_BASE_URL && !config.OPENAI_API_KEY) {
      log.warn('no LLM or STT is configured (OPENAI_BASE_URL, OPENAI_API_KEY): the avatar will not converse');
      return;
    }

    const tts = ttsFor(config, playback.defaultVoiceId);
    // The greeting is synthesised while the call is set up (not once the user is there), which also
    // warms the avatar's own voice; without one, a word of it is.
    const { greeting, language } = playback.live;
    const greetingAudio = greeting ? synthesizeAhead(tts, greeting, warmed, log) : undefined;
    if (!greeting && !config.TTS_MODEL) void warmed.then(() => warmVoice(playback.defaultVoiceId)).catch(() => {});

    await ctx.connect(undefined, AutoSubscribe.AUDIO_ONLY);
    resubscribeStalledTracks(ctx.room, {
      wanted: (pub, p) => pub.kind === TrackKind.KIND_AUDIO && p.kind !== ParticipantKind.AGENT,
      onResubscribe: (track) => log.warn(track, "the user's audio track never came; subscribing again"),
    });
    // The avatar ends the call: the voice leaves before the avatar closes the room.
    const call = { ended: false };
    ctx.room.localParticipant?.registerRpcMethod(RPC_CALL_ENDED, async (data) => {
      if (data.callerIdentity !== session.avatarIdentity) return 'reject';
      call.ended = true;
      ctx.shutdown('call ended');
      return 'ok';
    });
    const apiKey = config.OPENAI_API_KEY ?? 'unused';
    const gate = new TurnGate(language);
    const agentSession = new voice.AgentSession({
      vad: new GatedVAD(vad, gate, silences),
      // Batch STT on each stretch of speech the STT's VAD cuts (agents-js would cut with the turn's VAD).
      stt: new stt.StreamAdapter(
        new GatedSTT(gate, {
          useRealtime: false,
          model: config.STT_MODEL,
          language,
          apiKey,
          client: upstreamClient(config, config.STT_TIMEOUT_SECONDS),
        }),
        sttVad,
      ),
      llm: new openai.LLM({
        model: config.LLM_MODEL,
        apiKey,
        client: upstreamClient(config, config.LLM_TIMEOUT_SECONDS),
      }),
      tts,
      // Offline turn-taking: VAD ends the user's turn and interrupts the avatar (no cloud models),
      // under the rules of turns.ts (a pause inside an unfinished sentence kept, barge-in).
      turnHandling: {
        // The turn's VAD ends the turn after the short silence when the words just said finish a
        // sentence, after the long one otherwise (end-of-turn.ts), both counted in the audio: no
        // wait on top. By then the reply is ready: agents-js starts it on the transcript
        // (preemptive generation: the LLM, and with AGENT_PREEMPTIVE_TTS its TTS too), and drops
        // it if the user goes on.
        turnDetection: 'vad',
        interruption: INTERRUPTION,
        endpointing: { minDelay: 0 },
        preemptiveGeneration: { enabled: true, preemptiveTts: config.AGENT_PREEMPTIVE_TTS },
      },
      // agents-js would neither hear nor be interrupted by the user over the first 3 s of its first
      // reply, while a phone line's echo canceller converges. Our users are browsers and apps with
      // LiveKit's SDKs, which cancel their own echo: a user who answers the greeting must be heard.
      aecWarmupDuration: null,
      // A failing or silent model is known within seconds: one retry, bounded waits.
      connOptions: {
        llmConnOptions: { ...UPSTREAM_RETRY, timeoutMs: config.LLM_TIMEOUT_SECONDS * 1000 },
        sttConnOptions: { ...UPSTREAM_RETRY, timeoutMs: config.STT_TIMEOUT_SECONDS * 1000 },
      },
    });
    // The avatar plays our audio: it tells us when each segment starts and ends (transcripts follow it).
    const timings = new ReplyTimings(log);
    agentSession.output.audio = new TimedAudioOutput(
      timings,
      log,
      {
        room: ctx.room,
        destinationIdentity: session.avatarIdentity,
        waitRemoteTrack: TrackKind.KIND_VIDEO,
        waitPlaybackStart: true,
      },
      call,
    );
    timings.watch(agentSession);
    // The menu as the avatar would draw from it (actions with a playable take).
    const menu = createReactionPicker(playback.behavior, playback.availability, 0).actionMenu();
    const agent = new voice.Agent({
      instructions: playback.instructions,
      tools: actionTools(ctx.room, session.avatarIdentity, menu),
    });
    agentSession.on(voice.AgentSessionEventTypes.Close, (ev) => {
      log.info({ reason: ev.reason }, 'voice session closed');
      // Leaving makes the avatar end the call (settled once), rather than idle on without a voice.
      ctx.shutdown('voice session closed');
    });
    // Whether the user's turn is still open (they spoke, and it has not ended): a reply made
    // preemptively can fail before it has, and an apology said then would be dropped as the turn ends.
    let turnOpen = false;
    let apologyDue = false;
    const apologise = () => agentSession.say(LLM_FAILED_LINE, { allowInterruptions: true, addToChatCtx: false });
    agentSession.on(voice.AgentSessionEventTypes.UserStateChanged, (ev) => {
      if (ev.newState === 'speaking') turnOpen = true;
    });
    agentSession.on(voice.AgentSessionEventTypes.MetricsCollected, (ev) => {
      if (ev.metrics.type !== 'eou_metrics') return;
      turnOpen = false;
      if (apologyDue) apologise();
      apologyDue = false;
    });
    agentSession.on(voice.AgentSessionEventTypes.Error, (ev) => {
      log.warn({ err: ev.error, source: ev.source?.label }, 'voice pipeline error');
      // The LLM failed this turn (after its retry): say so rather than go silent, once the turn has
      // ended; the call goes on, and agents-js closes the session only after repeated failures.
      if (ev.error.type === 'llm_error' && !ev.error.recoverable) {
        if (turnOpen) apologyDue = true;
        else apologise();
      }
    });
    // What was said, one line each (the user's transcript, the avatar's reply): personal data, so
    // only when the operator turns LOG_TRANSCRIPTS on.
    if (config.LOG_TRANSCRIPTS)
      agentSession.on(voice.AgentSessionEventTypes.ConversationItemAdded, (ev) => {
        if (ev.item.type === 'message')
          log.info({ role: ev.item.role, text: ev.item.textContent, interrupted: ev.item.interrupted }, 'said');
      });
    // What the user says over the avatar may be a backchannel (turns.ts).
    agentSession.on(voice.AgentSessionEventTypes.AgentStateChanged, (ev) => {
      gate.avatarSpeaking = ev.newState === 'speaking';
    });
    // The avatar plays a listening reaction when the user starts speaking: our VAD tells it.
    agentSession.on(voice.AgentSessionEventTypes.UserStateChanged, (ev) => {
      if (ev.newState !== 'speaking') return;
      ctx.room.localParticipant
        ?.performRpc({
          destinationIdentity: session.avatarIdentity,
          method: RPC_USER_SPEECH_STARTED,
          payload: '',
          responseTimeout: 2000,
        })
        .catch((err: unknown) => log.debug({ err }, 'could not tell the avatar the user speaks'));
    });
    await agentSession.start({
      agent,
      room: ctx.room,
      // The user's audio at the VADs' and the STT's rate, in AGENT_USER_AUDIO_FRAME_MS frames (user-audio.ts).
      inputOptions: { participantIdentity: session.userIdentity ?? undefined, audioSampleRate: USER_AUDIO_SAMPLE_RATE },
      // The audio goes out through the avatar (output.audio above), not a track of this room's
      // own: said so, agents-js keeps that output without a warning on every call.
      outputOptions: { audioEnabled: false },
      record: false,
    });
    takeUserAudioInFrames(agentSession, config.AGENT_USER_AUDIO_FRAME_MS, log);
    log.info({ actions: menu.length, language, greeting: greeting !== null }, 'voice session started');
    if (greeting) await sayGreeting(ctx, agentSession, session.userIdentity, greeting, greetingAudio, log);
  },
});
