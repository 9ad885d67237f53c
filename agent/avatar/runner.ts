/**
 * One call's avatar: a participant of the call's room that publishes one video track (camera, the
 * avatar's size, 25 fps) and one audio track (microphone), speaks what its agent sends over LiveKit's
 * avatar protocol, plays its body from the behaviour engine, listens to the user for listening
 * reactions, records when asked, and reports its lifecycle. The worker's host renders its frames
 * (with every other call's) and hands them back through `due` / `show`.
 */
import type { VAD } from '@livekit/agents';
import { AudioFrame, AudioSource, VideoBufferType, VideoFrame, VideoSource } from '@livekit/rtc-node';
import type { Logger } from '../../core/platform/log.ts';
import type { ObjectStorage } from '../../core/platform/storage/index.ts';
import { AvatarRoom, type AvatarRoomParts, type VideoCodecName } from './avatar-room.ts';
import type { Body } from './body.ts';
import { BodyMedia } from './body-media.ts';
import { boundedStep } from './bounded-step.ts';
import type { CallRecordingSink, CallReporter, CallSpec, EndReason, ParticipantRole } from './call.ts';
import { CallRecording } from './call-recording.ts';
import { FramePipeline, type DueFrame } from './frames.ts';
import type { MediaCache } from './media.ts';
import { SpeechPlayout, type AudioSink, type MouthStream, type PlayoutHealth } from './playout.ts';
import { UserAudio } from './user-audio.ts';

/** What every call of a worker shares. */
export interface HostContext {
  media: MediaCache;
  vad: VAD | null;
  storage: ObjectStorage;
  livekit: { url: string; apiKey: string; apiSecret: string };
  log: Logger;
  /** Local scratch space (recordings while they are written). */
  workDir: string;
  fps: number;
  sampleRate: number;
  /** How long a call waits for its user before it ends unstarted. */
  userJoinTimeoutMs: number;
  heartbeatMs: number;
  /** Audio queued ahead of playout in rtc-node, ms (the synchronizer's clock reference). */
  audioQueueMs: number;
  /** How long a frame is held after its audio leaves that queue (SpeechPlayoutOptions.videoDelayMs). */
  videoDelayMs: number;
  /** Speech a segment holds before it starts playing, ms (SpeechPlayoutOptions.startBufferSamples). */
  speechStartMs: number;
  videoCodec: VideoCodecName;
  /** A new mouth analysis of a segment's audio (AudioVisemeStream's shape; the worker's runs in a thread). */
  mouthStream: (sampleRate: number, fps: number) => MouthStream;
  /**
   * The lip-sync engine draws from each frame's audio (a neural model): a frame gets the audio its
   * mel window reads instead of a mouth shape, and speech is not analysed for visemes.
   */
  neural: boolean;
  /**
   * Test and benchmark aid: a 32 px square in the top-left corner of each frame, white while the
   * audio playing at that frame is speech, black otherwise; a viewer measures A/V sync with it.
   */
  syncMarker?: boolean;
  /** Benchmark aid: told of every frame published (`mouth`: a mouth was drawn on it) and every speech segment that arrives. */
  observer?: CallObserver;
}

export interface CallObserver {
  frameShown(sessionId: string, frame: number, mouth: boolean): void;
  speechArrived(sessionId: string): void;
}

/**
 * The call's audio kept for a neural model's frames: a frame's mel window reads from 25 ms before
 * its time, and a frame is drawn at most the sink's queue and the video hold behind what was handed
 * over; a second is ample.
 */
const KEEP_AUDIO_SECONDS = 1;

/** How long before LiveKit closes an empty room the call ends itself, its user never come: the time to leave it cleanly. */
const EMPTY_ROOM_MARGIN_MS = 5000;

/**
 * The audio handed to rtc-node at a time, ms: each hand-over is an FFI request and an event back,
 * decoded on the event loop. 40 ms chunks against 20: a bare AudioSource's process used 24-37 ms
 * of CPU a second against 47; in `npm run bench -- sessions --steps=8`, three runs each way
 * alternated, the worker used 157-169 ms a second per call against 164-170, with the same frame
 * rates. At most half the queue (20 ms at least, as before), so the queue takes the next chunk
 * while it still holds the one before.
 */
function audioChunkMs(queueMs: number): number {
  return Math.max(20, Math.min(40, Math.floor(queueMs / 20) * 10));
}

/** The avatar's own clock on a real rtc-node AudioSource. */
function sourceSink(source: AudioSource, sampleRate: number, queueMs: number): AudioSink {
  return {
    sampleRate,
    queueSamples: Math.round((sampleRate * queueMs) / 1000),
    capture: (pcm) => source.captureFrame(new AudioFrame(pcm, sampleRate, 1, pcm.length)),
    clear: () => source.clearQueue(),
  };
}

/**
 * Coordinates one call's parts: its body and media (BodyMedia), the playout of its agent's speech
 * (SpeechPlayout), its frames (FramePipeline), its room connection (AvatarRoom), its recording
 * (CallRecording), and its lifecycle: started with the user, heartbeats, ended exactly once.
 */
export class AvatarRunner {
  readonly spec: CallSpec;
  private readonly log: Logger;
  private readonly room: AvatarRoom;
  private readonly media: BodyMedia;
  private body!: Body;
  private playout!: SpeechPlayout;
  private frames: FramePipeline | null = null;
  private videoSource!: VideoSource;
  private audioSource!: AudioSource;
  private width = 0;
  private height = 0;
  /** The call's recording, when it is to be recorded; it starts with the user's arrival. */
  private readonly recording: CallRecording | null;
  private startedAt: Date | null = null;
  private joined = false;
  private timers: NodeJS.Timeout[] = [];
  private ending: Promise<void> | null = null;
  private endReason: EndReason | null = null;
  private resolveEnded!: (reason: EndReason) => void;
  /** Resolves with the reason once the call is over and reported. */
  readonly ended: Promise<EndReason>;

  constructor(
    private readonly ctx: HostContext,
    spec: CallSpec,
    private readonly reporter: CallReporter,
    recordingSink: CallRecordingSink | null,
    /** Called once the call is over (the host drops it). */
    private readonly onEnd: (runner: AvatarRunner) => void,
  ) {
    this.spec = spec;
    this.log = ctx.log.child({ sessionId: spec.sessionId, room: spec.roomName });
    this.ended = new Promise((r) => (this.resolveEnded = r));
    this.media = new BodyMedia(ctx.media, this.log);
    this.recording =
      spec.record && recordingSink
        ? new CallRecording({
            sink: recordingSink,
            storage: ctx.storage,
            workDir: ctx.workDir,
            fps: ctx.fps,
            sampleRate: ctx.sampleRate,
            position: () => this.playout.position(),
            log: this.log,
          })
        : null;
    this.room = new AvatarRoom({
      livekit: ctx.livekit,
      spec,
      userJoinTimeoutMs: ctx.userJoinTimeoutMs,
      video: { codec: ctx.videoCodec, fps: ctx.fps },
      log: this.log,
      ending: () => this.ending !== null,
      openUserAudio: (track) =>
        new UserAudio({
          track,
          sampleRate: ctx.sampleRate,
          // Our voice agent reports the user's speech (conversation mode); another agent does not (provider mode).
          vad: spec.mode === 'provider' ? ctx.vad : null,
          log: this.log,
          onSpeechStarted: () => this.body.userSpeechStarted(),
          onAudio: (pcm) => this.recording?.userAudio(pcm),
        }),
      onParticipant: (identity, role, kind) => this.onParticipant(identity, role, kind),
      onReconnected: () => this.observe(spec.avatarIdentity, 'avatar', 'reconnected'),
      onClosed: () => void this.end('room_closed'),
    });
  }

  /** The call's sound and picture on the media loaded: the sources the room publishes, the playout, the frames. */
  private prepare(body: Body, width: number, height: number): AvatarRoomParts {
    this.body = body;
    this.width = width;
    this.height = height;
    this.audioSource = new AudioSource(this.ctx.sampleRate, 1, this.ctx.audioQueueMs);
    this.videoSource = new VideoSource(this.width, this.height);
    this.playout = new SpeechPlayout({
      sink: sourceSink(this.audioSource, this.ctx.sampleRate, this.ctx.audioQueueMs),
      fps: this.ctx.fps,
      videoDelayMs: this.ctx.videoDelayMs,
      startBufferSamples: Math.round((this.ctx.sampleRate * this.ctx.speechStartMs) / 1000),
      chunkSamples: Math.round((this.ctx.sampleRate * audioChunkMs(this.ctx.audioQueueMs)) / 1000),
      ...(this.ctx.neural ? { keepAudioSeconds: KEEP_AUDIO_SECONDS } : { mouthStream: this.ctx.mouthStream }),
      onEvent: (e) => this.room.receiver?.onPlayoutEvent(e),
      onSegment: () => this.ctx.observer?.speechArrived(this.spec.sessionId),
      onPushed: (at, pcm) => this.recording?.avatarAudio(at, pcm),
      onDropped: (from) => this.recording?.avatarAudioDropped(from),
    });
    this.recording?.prepare(width, height);
    this.frames = new FramePipeline({
      playout: this.playout,
      body: this.body,
      width,
      height,
      fps: this.ctx.fps,
      sampleRate: this.ctx.sampleRate,
      neural: this.ctx.neural,
      syncMarker: this.ctx.syncMarker ?? false,
    });
    return { playout: this.playout, body, sources: { audio: this.audioSource, video: this.videoSource } };
  }

  /** Loads the picture, joins the room, publishes, and reports the avatar joined. Throws when it cannot. */
  async start(): Promise<void> {
    const t0 = performance.now();
    let loadedMs = 0;
    // The room is joined while the media loads; the tracks are published once it has.
    await this.room.join(
      this.media.load(this.spec).then(({ body, width, height }) => {
        loadedMs = Math.round(performance.now() - t0);
        return this.prepare(body, width, height);
      }),
    );
    const joinedMs = Math.round(performance.now() - t0);
    this.playout.start();
    this.joined = true;
    await this.reporter.joined();
    this.observe(this.spec.avatarIdentity, 'avatar', 'joined');
    this.log.info(
      { ms: Math.round(performance.now() - t0), loadedMs, joinedMs, width: this.width, height: this.height },
      'avatar joined the call',
    );

    for (const p of this.room.present()) this.onParticipant(p.identity, p.role, 'joined');
    // The wait for the user ends before LiveKit would close the room under the avatar and its voice
    // (their connections then logged errors): the call ends as any other, the room closed after them.
    const roomCloses = this.room.msUntilEmptyRoomCloses();
    const joinWaitMs = Math.max(
      0,
      Math.min(this.ctx.userJoinTimeoutMs, roomCloses === null ? Infinity : roomCloses - EMPTY_ROOM_MARGIN_MS),
    );
    this.timers.push(setTimeout(() => void (this.startedAt ? undefined : this.end('user_never_joined')), joinWaitMs));
    this.timers.push(setInterval(() => void this.heartbeat(), this.ctx.heartbeatMs));
  }

  /** The next frame to draw (FramePipeline.next); null once ending. */
  nextToRender(now: number): DueFrame | null {
    if (this.ending || !this.frames) return null;
    return this.frames.next(now);
  }

  /** A drawn frame, kept until its time comes. */
  rendered(job: DueFrame, i420: Uint8Array): void {
    if (!this.ending) this.frames?.rendered(job, i420);
  }

  /**
   * About how long until the next frame is due, in ms. Infinity before playout starts, once ending,
   * and when it is due already (this tick showed what was drawn; a frame still drawing is shown
   * when its batch ends).
   */
  msUntilNextFrame(now: number): number {
    if (this.ending || !this.frames) return Infinity;
    return this.frames.msUntilNext(now);
  }

  /**
   * Publishes the frame due now, if it is drawn (and records it); null when none was. A frame not
   * drawn in time is skipped: `skipped` counts those since the last frame shown.
   */
  showDue(now: number): { skipped: number } | null {
    if (this.ending || !this.frames) return null;
    const shown = this.frames.takeDue(now);
    if (!shown) return null;
    // Captured now, the moment its audio plays (the synchronizer's choice of frame), with the native
    // capture time. Stamping frames with an earlier "ideal" time instead made receivers drop them.
    this.videoSource.captureFrame(new VideoFrame(shown.i420, this.width, this.height, VideoBufferType.I420));
    this.ctx.observer?.frameShown(this.spec.sessionId, shown.frame, shown.mouth);
    this.recording?.video(shown.frame, shown.i420);
    return { skipped: shown.skipped };
  }

  /** Ends the call (idempotent): reports the end, leaves the room, finishes the recording. */
  end(reason: EndReason): Promise<void> {
    if (this.ending) return this.ending;
    this.endReason = reason;
    const at = new Date();
    this.ending = (async () => {
      for (const t of this.timers) clearTimeout(t);
      this.log.info({ reason, audio: this.audioHealth }, 'call ending');
      // Each step is bounded (bounded-step.ts): one that hangs must not keep the call's slot, nor a
      // draining worker, forever.
      await this.step('stop the audio', () => this.playout?.stop());
      this.room.receiver?.stop();
      await this.step('close the user audio', () => this.room.closeUserAudio());
      const endSample = this.playout?.position() ?? 0;
      // Reported before leaving: the avatar's leave reaches the API as a webhook, which would
      // otherwise end the call first, as avatar_left.
      await this.step('report the end', () =>
        this.reporter
          .ended(reason, at)
          .catch((err: unknown) => this.log.error({ err }, 'could not report the end of the call')),
      );
      await this.step('dismiss the voice agent', () => this.room.dismissAgent());
      await this.step('leave the room', () => this.room.leave());
      await this.room.closeIfOwned();
      await this.step('close the audio source', () => this.audioSource?.close());
      this.media.release();
      this.onEnd(this);
      this.resolveEnded(reason);
      await this.recording?.finish(endSample);
    })();
    return this.ending;
  }

  private step(step: string, run: () => Promise<unknown> | undefined): Promise<void> {
    return boundedStep(this.log, step, run);
  }

  /** Joined and publishing frames (the host's render stats count a call's rate over this time only). */
  get publishing(): boolean {
    return this.joined && !this.ending;
  }

  get reason(): EndReason | null {
    return this.endReason;
  }

  /** What the call's audio lost so far (queue underruns, late speech); null before it joined. */
  get audioHealth(): PlayoutHealth | null {
    return this.playout ? { ...this.playout.health } : null;
  }

  // ---------------------------------------------------------------------------------------------

  private onParticipant(identity: string, role: ParticipantRole, kind: 'joined' | 'left'): void {
    if (this.ending) return;
    this.observe(identity, role, kind);
    if (kind === 'joined' && role === 'user' && !this.startedAt) {
      this.startedAt = new Date();
      void this.onStarted(this.startedAt);
    }
    if (kind === 'left' && role === 'user' && !this.room.hasUser()) void this.end('user_left');
    if (kind === 'left' && role === 'agent') void this.end('agent_left');
  }

  private async onStarted(at: Date): Promise<void> {
    await this.reporter
      .started(at)
      .catch((err: unknown) => this.log.error({ err }, 'could not report the call started'));
    this.timers.push(setTimeout(() => void this.end('max_duration'), this.spec.maxDurationSeconds * 1000));
    await this.recording?.start(this.width, this.height, (this.frames?.lastShown ?? -1) + 1);
  }

  private observe(identity: string, role: ParticipantRole, kind: 'joined' | 'left' | 'reconnected'): void {
    this.reporter
      .observe({ participantIdentity: identity, role, kind, at: new Date() })
      .catch((err: unknown) => this.log.warn({ err }, 'could not record a connection observation'));
  }

  private async heartbeat(): Promise<void> {
    if (this.ending) return;
    try {
      const { ended } = await this.reporter.heartbeat();
      if (ended) await this.end('released');
    } catch (err) {
      this.log.warn({ err }, 'heartbeat failed');
    }
  }
}
