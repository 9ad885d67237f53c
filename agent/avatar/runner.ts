/**
 * One call's avatar: a participant of the call's room that publishes one video track (camera, the
 * avatar's size, 25 fps) and one audio track (microphone), speaks what its agent sends over LiveKit's
 * avatar protocol, plays its body from the behaviour engine, listens to the user for listening
 * reactions, records when asked, and reports its lifecycle. The worker's host renders its frames
 * (with every other call's) and hands them back through `due` / `show`.
 */
import { createHash } from 'node:crypto';
import type { VAD } from '@livekit/agents';
import {
  AudioFrame,
  AudioSource,
  ParticipantKind,
  Room,
  RoomEvent,
  TrackKind,
  VideoBufferType,
  VideoFrame,
  VideoSource,
  type RemoteParticipant,
  type RemoteTrack,
  type RemoteTrackPublication,
} from '@livekit/rtc-node';
import { RoomServiceClient } from 'livekit-server-sdk';
import type { Logger } from '../../core/platform/log.ts';
import type { ObjectStorage } from '../../core/platform/storage/index.ts';
import { orAfter } from '../../core/platform/time.ts';
import type { Availability } from '../../clips/behavior/index.ts';
import { SOURCE_MEMBER_ID } from '../../clips/behavior/index.ts';
import { i420Planes, i420Size } from '../../render/encode/index.ts';
import { frameAudioSpan } from '../../render/lipsync/index.ts';
import { isNeutral } from '../../render/synth/index.ts';
import { mouthShape } from '../../render/talking-head/index.ts';
import { answerAgentRpcs, avatarToken, publishAvatarTracks, type VideoCodecName } from './avatar-room.ts';
import { BehaviorBody, SceneBody, type Body } from './body.ts';
import type { CallRecordingSink, CallReporter, CallSpec, EndReason, ParticipantRole } from './call.ts';
import { CallRecording } from './call-recording.ts';
import type { ClipMedia, MediaCache } from './media.ts';
import { SpeechPlayout, type AudioSink, type MouthStream, type PlayoutHealth } from './playout.ts';
import { AvatarAudioReceiver } from './receiver.ts';
import type { CallRecorder } from './recorder.ts';
import type { FrameJob } from './renderer.ts';
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

/** A frame the host should render now for this call. */
export interface DueFrame extends FrameJob {
  frame: number;
  /** The playout's epoch it was drawn for (SpeechPlayout.epoch): drawn before audio was dropped, it may show what no longer plays. */
  epoch: number;
}

/** How long a step of ending a call (or of leaving a room a failed join left) may take before the call goes on without it. */
const STEP_MS = 5000;
/** Tries at joining a call's room (connect and publish) before the call fails. */
const JOIN_ATTEMPTS = 2;
/**
 * Frames drawn ahead of playout, at most: 80 ms of slack for a batch on a busy machine. A frame is
 * drawn ahead only once its audio is queued and its mouth known (SpeechPlayout.frameKnown).
 */
const DRAW_AHEAD = 2;
const MARKER = 32;
/**
 * The call's audio kept for a neural model's frames: a frame's mel window reads from 25 ms before
 * its time, and a frame is drawn at most the sink's queue and the video hold behind what was handed
 * over; a second is ample.
 */
const KEEP_AUDIO_SECONDS = 1;

/** The avatar's own clock on a real rtc-node AudioSource. */
function sourceSink(source: AudioSource, sampleRate: number, queueMs: number): AudioSink {
  return {
    sampleRate,
    queueSamples: Math.round((sampleRate * queueMs) / 1000),
    capture: (pcm) => source.captureFrame(new AudioFrame(pcm, sampleRate, 1, pcm.length)),
    clear: () => source.clearQueue(),
  };
}

function seedOf(id: string): number {
  return createHash('sha256').update(id).digest().readUInt32LE(0);
}

export class AvatarRunner {
  readonly spec: CallSpec;
  private readonly log: Logger;
  /** The call's room connection (a new one when joining had to be tried again). */
  private room = new Room();
  private body!: Body;
  private playout!: SpeechPlayout;
  private receiver!: AvatarAudioReceiver;
  private videoSource!: VideoSource;
  private audioSource!: AudioSource;
  private width = 0;
  private height = 0;
  /** Frame buffers (I420): the one shown and those drawn ahead. */
  private buffers: Uint8Array[] = [];
  /** The audio of each frame buffer's frame, for a neural model (its mel window is computed from it in the lip-sync thread). */
  private audioBuffers: Int16Array[] = [];
  private lastShown = -1;
  private lastQueued = -1;
  private epoch = 0;
  private readonly ready = new Map<number, { job: DueFrame; i420: Uint8Array }>();
  private readonly held: string[] = [];
  private readonly loaded = new Map<string, ClipMedia>();
  private readonly userAudio = new Map<string, UserAudio>();
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
    this.recording =
      spec.record && recordingSink
        ? new CallRecording({
            sink: recordingSink,
            storage: ctx.storage,
            workDir: ctx.workDir,
            fps: ctx.fps,
            sampleRate: ctx.sampleRate,
            log: this.log,
          })
        : null;
  }

  /** What writes the recording now; null unless recording. */
  private get recorder(): CallRecorder | null {
    return this.recording?.recorder ?? null;
  }

  /** Loads the picture, joins the room, publishes, and reports the avatar joined. Throws when it cannot. */
  async start(): Promise<void> {
    const t0 = performance.now();
    await this.loadBody();
    // Shared with the lip-sync thread, which draws the mouth into them in place.
    this.buffers = Array.from(
      { length: DRAW_AHEAD + 1 },
      () => new Uint8Array(new SharedArrayBuffer(i420Size(this.width, this.height))),
    );
    if (this.ctx.neural) {
      const samples = frameAudioSpan(0, this.ctx.fps, this.ctx.sampleRate).length;
      this.audioBuffers = this.buffers.map(
        () => new Int16Array(new SharedArrayBuffer(samples * Int16Array.BYTES_PER_ELEMENT)),
      );
    }
    this.audioSource = new AudioSource(this.ctx.sampleRate, 1, this.ctx.audioQueueMs);
    this.videoSource = new VideoSource(this.width, this.height);
    this.playout = new SpeechPlayout({
      sink: sourceSink(this.audioSource, this.ctx.sampleRate, this.ctx.audioQueueMs),
      fps: this.ctx.fps,
      videoDelayMs: this.ctx.videoDelayMs,
      startBufferSamples: Math.round((this.ctx.sampleRate * this.ctx.speechStartMs) / 1000),
      ...(this.ctx.neural ? { keepAudioSeconds: KEEP_AUDIO_SECONDS } : { mouthStream: this.ctx.mouthStream }),
      onEvent: (e) => this.receiver.onPlayoutEvent(e),
      onSegment: () => this.ctx.observer?.speechArrived(this.spec.sessionId),
      onPushed: (at, pcm) => this.recorder?.avatarAudio(at, pcm),
      onDropped: (from) => this.recorder?.avatarAudioDropped(from),
    });
    for (let attempt = 1; ; attempt++) {
      try {
        await this.join();
        break;
      } catch (err) {
        if (attempt >= JOIN_ATTEMPTS || this.ending) throw err;
        // The room is joined but a track's publication goes unanswered (rtc-node gives up after
        // 10 s): a server that lost it, or an engine stuck on its own negotiation (LiveKit's Rust
        // SDK before 0.12.74 could deadlock there: package.json overrides it). A new connection publishes.
        this.log.warn({ err, attempt }, 'could not join the call; joining again');
        const failed = this.room;
        this.room = new Room();
        // Bounded: the failed connection's disconnect can hang (seen in CI), and the retry must not wait on it.
        await this.boundedStep('leave the room of the failed join', () => failed.disconnect());
      }
    }
    this.playout.start();
    this.joined = true;
    await this.reporter.joined();
    this.observe(this.spec.avatarIdentity, 'avatar', 'joined');
    this.log.info(
      { ms: Math.round(performance.now() - t0), width: this.width, height: this.height },
      'avatar joined the call',
    );

    for (const p of this.room.remoteParticipants.values()) this.onParticipant(p, 'joined');
    this.timers.push(
      setTimeout(() => void (this.startedAt ? undefined : this.end('user_never_joined')), this.ctx.userJoinTimeoutMs),
    );
    this.timers.push(setInterval(() => void this.heartbeat(), this.ctx.heartbeatMs));
  }

  /** Connects to the call's room as the avatar, answers its RPCs and publishes its audio and video. */
  private async join(): Promise<void> {
    const room = this.room;
    this.receiver = new AvatarAudioReceiver({
      room,
      playout: this.playout,
      senderIdentity: this.spec.agentIdentity,
      log: this.log,
    });

    room.on(RoomEvent.ParticipantConnected, (p) => this.onParticipant(p, 'joined'));
    room.on(RoomEvent.ParticipantDisconnected, (p) => this.onParticipant(p, 'left'));
    room.on(RoomEvent.TrackPublished, (pub, p) => this.subscribeIfHeard(pub, p));
    room.on(RoomEvent.TrackSubscribed, (track, pub, p) => this.onTrack(track, pub, p));
    room.on(RoomEvent.TrackUnsubscribed, (_track, pub, p) => this.closeUserAudio(p.identity, pub.sid));
    room.on(RoomEvent.Reconnected, () => this.observe(this.spec.avatarIdentity, 'avatar', 'reconnected'));
    room.on(RoomEvent.Disconnected, () => void (room === this.room ? this.end('room_closed') : undefined));

    // Subscribed to nothing by default: a subscribed audio track costs the worker its receipt and
    // decoding (about 8 ms of CPU a second) though nothing reads it.
    await room.connect(
      this.ctx.livekit.url,
      await avatarToken(this.ctx.livekit, this.spec, this.ctx.userJoinTimeoutMs),
      { autoSubscribe: false, dynacast: false },
    );
    for (const p of room.remoteParticipants.values())
      for (const pub of p.trackPublications.values()) this.subscribeIfHeard(pub, p);
    this.receiver.start();
    const lp = room.localParticipant!;
    answerAgentRpcs(lp, this.spec.agentIdentity, this.body);
    await publishAvatarTracks(
      lp,
      this.spec.avatarIdentity,
      { audio: this.audioSource, video: this.videoSource },
      { codec: this.ctx.videoCodec, fps: this.ctx.fps },
    );
  }

  /**
   * The next frame to draw, up to DRAW_AHEAD frames ahead of playout: the host renders it (with
   * every call's) while the current frame shows, so a slow batch never delays a capture.
   */
  nextToRender(now: number): DueFrame | null {
    if (this.ending || !this.playout) return null;
    this.forgetStaleFrames();
    const due = this.playout.frameAt(now, this.lastShown).frame;
    const k = Math.max(due, this.lastQueued + 1);
    if (k > due + DRAW_AHEAD) return null;
    // Drawn once what plays then is settled (its audio in the sink, its mouth analysed), unless it
    // falls due too soon to wait: late audio must not leave a closed mouth where speech plays.
    if (k > due && !this.playout.frameKnown(k) && this.playout.msUntilFrame(k, now) > 1000 / this.ctx.fps) return null;
    this.lastQueued = k;
    const body = this.body.frameAt(k);
    const slot = k % this.buffers.length;
    const target = this.buffers[slot]!;
    if (this.ctx.neural)
      return {
        frame: k,
        body,
        shape: null,
        audio: this.playout.frameAudio(k, this.audioBuffers[slot]!),
        target,
        epoch: this.epoch,
      };
    const content = this.playout.frameContent(k);
    const shape = content.mouth ? mouthShape(content.mouth) : null;
    return { frame: k, body, shape: shape && !isNeutral(shape) ? shape : null, audio: null, target, epoch: this.epoch };
  }

  /** A drawn frame, kept until its time comes. */
  rendered(job: DueFrame, i420: Uint8Array): void {
    if (!this.ending && job.frame > this.lastShown && this.playout.frameCurrent(job.frame, job.epoch))
      this.ready.set(job.frame, { job, i420 });
  }

  /** Audio was dropped since frames were drawn ahead (speech started, or an interruption): those it covered are drawn again. */
  private forgetStaleFrames(): void {
    if (this.playout.epoch === this.epoch) return;
    const drawnAt = this.epoch;
    this.epoch = this.playout.epoch;
    for (const k of [...this.ready.keys()]) if (!this.playout.frameCurrent(k, drawnAt)) this.ready.delete(k);
    let kept = this.lastShown;
    while (kept < this.lastQueued && this.playout.frameCurrent(kept + 1, drawnAt)) kept++;
    this.lastQueued = kept;
  }

  /**
   * About how long until the next frame is due, in ms. Infinity before playout starts, once ending,
   * and when it is due already (this tick showed what was drawn; a frame still drawing is shown
   * when its batch ends).
   */
  msUntilNextFrame(now: number): number {
    if (this.ending || !this.playout) return Infinity;
    const ms = this.playout.msUntilFrame(this.lastShown + 1, now);
    return ms > 0 ? ms : Infinity;
  }

  /** Publishes the frame due now, if it is drawn (and records it); true when one was. A frame not drawn in time is skipped. */
  showDue(now: number): boolean {
    if (this.ending || !this.playout) return false;
    this.forgetStaleFrames();
    const due = this.playout.frameAt(now, this.lastShown).frame;
    if (due <= this.lastShown) return false;
    const drawn = this.ready.get(due);
    if (!drawn) return false;
    for (const k of this.ready.keys()) if (k <= due) this.ready.delete(k);
    this.lastShown = due;
    let out = drawn.i420;
    if (this.ctx.syncMarker) {
      const own = this.buffers[due % this.buffers.length]!;
      if (out !== own) own.set(out);
      out = own;
      // The loudness as the sink has it (known once its audio is handed over, which it is once due).
      paintMarker(out, this.width, this.height, this.playout.frameContent(due).level > 1000);
    }
    // Captured now, the moment its audio plays (the synchronizer's choice of frame), with the native
    // capture time. Stamping frames with an earlier "ideal" time instead made receivers drop them.
    this.videoSource.captureFrame(new VideoFrame(out, this.width, this.height, VideoBufferType.I420));
    this.ctx.observer?.frameShown(this.spec.sessionId, due, drawn.job.shape !== null || drawn.job.audio !== null);
    if (this.recorder) {
      this.recorder.video(due, out);
      // Audio follows a little behind playout (so the user's audio for that time has arrived), every 200 ms.
      if (due % 5 === 0) this.recorder.flushAudio(this.playout.position() - this.ctx.sampleRate * 0.15);
    }
    return true;
  }

  /** Ends the call (idempotent): reports the end, leaves the room, finishes the recording. */
  end(reason: EndReason): Promise<void> {
    if (this.ending) return this.ending;
    this.endReason = reason;
    const at = new Date();
    this.ending = (async () => {
      for (const t of this.timers) clearTimeout(t);
      this.log.info({ reason, audio: this.audioHealth }, 'call ending');
      // Each step is bounded: one that hangs (a native call, the database) must not keep the call's
      // slot, nor a draining worker, forever. What a bounded step left undone, the API's janitor settles.
      await this.boundedStep('stop the audio', () => this.playout?.stop());
      this.receiver?.stop();
      await this.boundedStep('close the user audio', () =>
        Promise.all([...this.userAudio.values()].map((u) => u.close())),
      );
      const endSample = this.playout?.position() ?? 0;
      // Reported before leaving: the avatar's leave reaches the API as a webhook, which would
      // otherwise end the call first, as avatar_left.
      await this.boundedStep('report the end', () =>
        this.reporter
          .ended(reason, at)
          .catch((err: unknown) => this.log.error({ err }, 'could not report the end of the call')),
      );
      await this.boundedStep('leave the room', () => this.room.disconnect());
      if (this.spec.ownsRoom) {
        const http = this.ctx.livekit.url.replace(/^ws/, 'http');
        await this.boundedStep('close the room', () =>
          new RoomServiceClient(http, this.ctx.livekit.apiKey, this.ctx.livekit.apiSecret).deleteRoom(
            this.spec.roomName,
          ),
        );
      }
      await this.boundedStep('close the audio source', () => this.audioSource?.close());
      for (const key of this.held) this.ctx.media.release(key);
      this.onEnd(this);
      this.resolveEnded(reason);
      await this.recording?.finish(endSample);
    })();
    return this.ending;
  }

  /** A step of ending a call, or of cleaning up after a failed join (its failure ignored): after STEP_MS the call goes on without it. */
  private async boundedStep(step: string, run: () => Promise<unknown> | undefined): Promise<void> {
    const outcome = await orAfter(
      Promise.resolve(run()).catch(() => {}),
      STEP_MS,
      'late' as const,
    );
    if (outcome === 'late') this.log.warn({ step, ms: STEP_MS }, 'a step did not finish in time; going on');
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

  private async hold(cacheKey: string): Promise<ClipMedia> {
    const media = await this.ctx.media.acquire(cacheKey);
    this.held.push(cacheKey);
    return media;
  }

  private async loadBody(): Promise<void> {
    const b = this.spec.body;
    if (b.kind === 'scene') {
      const media = await this.hold(b.cacheKey);
      this.body = new SceneBody(media, b.continuation);
      this.width = media.width;
      this.height = media.height;
      return;
    }
    const pb = b.playback;
    if (!pb.loopCacheKey) throw new Error(`Avatar ${pb.avatarId} has no idle loop to play`);
    const loop = await this.hold(pb.loopCacheKey);
    this.loaded.set(SOURCE_MEMBER_ID, loop);
    // Decoded and prepared while the avatar joins, ahead of play (MediaCache.warm), the loop first.
    const loopWarm = this.warm(loop, SOURCE_MEMBER_ID);
    this.width = loop.width;
    this.height = loop.height;
    // A clip is playable here once its media is loaded: until then it counts as pending.
    const availability: Availability = (id) => {
      if (this.loaded.has(id)) return 'ready';
      const base = pb.availability(id);
      return base === 'ready' ? 'pending' : base;
    };
    this.body = new BehaviorBody(
      pb.behavior,
      availability,
      (id) => this.loaded.get(id),
      seedOf(this.spec.sessionId),
      (play) => this.log.debug({ clipId: play.clipId, kind: play.kind }, 'clip playing'),
    );
    // Clips load in the background; the loop alone is enough to start.
    for (const clip of pb.clips.values()) {
      if (clip.availability !== 'ready' || !clip.cacheKey) continue;
      const key = clip.cacheKey;
      this.hold(key)
        .then(async (media) => {
          if (media.width !== this.width || media.height !== this.height) {
            this.log.warn({ clipId: clip.clipId }, 'clip of another size than the idle loop, not played');
            return;
          }
          await loopWarm;
          await this.warm(media, clip.clipId);
          this.loaded.set(clip.clipId, media);
        })
        .catch((err: unknown) => this.log.warn({ err, clipId: clip.clipId }, 'clip media could not be loaded'));
    }
  }

  private async warm(media: ClipMedia, clipId: string): Promise<void> {
    try {
      const { frames, ms } = await media.warm();
      this.log.debug({ clipId, frames, ms }, 'clip media warmed');
    } catch (err) {
      // Frames then decode as they first play, as before.
      this.log.warn({ err, clipId }, 'clip media could not be warmed');
    }
  }

  private roleOf(p: RemoteParticipant): ParticipantRole {
    if (p.identity === this.spec.agentIdentity) return 'agent';
    if (this.spec.userIdentity) return p.identity === this.spec.userIdentity ? 'user' : 'other';
    return p.kind === ParticipantKind.AGENT ? 'other' : 'user';
  }

  private onParticipant(p: RemoteParticipant, kind: 'joined' | 'left'): void {
    if (this.ending) return;
    const role = this.roleOf(p);
    this.observe(p.identity, role, kind);
    if (kind === 'joined' && role === 'user' && !this.startedAt) {
      this.startedAt = new Date();
      void this.onStarted(this.startedAt);
    }
    if (kind === 'left' && role === 'user' && !this.hasUser()) void this.end('user_left');
    if (kind === 'left' && role === 'agent') void this.end('agent_left');
  }

  private hasUser(): boolean {
    return [...this.room.remoteParticipants.values()].some((p) => this.roleOf(p) === 'user');
  }

  private async onStarted(at: Date): Promise<void> {
    await this.reporter
      .started(at)
      .catch((err: unknown) => this.log.error({ err }, 'could not report the call started'));
    this.timers.push(setTimeout(() => void this.end('max_duration'), this.spec.maxDurationSeconds * 1000));
    await this.recording?.start(this.width, this.height, this.lastShown + 1);
  }

  /** The avatar hears the user's audio for its own VAD (provider mode) and for the recording; nothing else. */
  private hears(kind: TrackKind | undefined, p: RemoteParticipant): boolean {
    return (
      !this.ending &&
      kind === TrackKind.KIND_AUDIO &&
      this.roleOf(p) === 'user' &&
      (this.spec.mode === 'provider' || this.spec.record)
    );
  }

  private subscribeIfHeard(pub: RemoteTrackPublication, p: RemoteParticipant): void {
    if (this.hears(pub.kind, p)) pub.setSubscribed(true);
  }

  private onTrack(track: RemoteTrack, pub: RemoteTrackPublication, p: RemoteParticipant): void {
    if (!this.hears(track.kind, p)) return;
    const key = `${p.identity}/${pub.sid}`;
    this.userAudio
      .get(key)
      ?.close()
      .catch(() => {});
    this.userAudio.set(
      key,
      new UserAudio({
        track,
        sampleRate: this.ctx.sampleRate,
        // Our voice agent reports the user's speech (conversation mode); another agent does not (provider mode).
        vad: this.spec.mode === 'provider' ? this.ctx.vad : null,
        log: this.log,
        onSpeechStarted: () => this.body.userSpeechStarted(),
        onAudio: (pcm) => this.recorder?.userAudio(this.playout.position(), pcm),
      }),
    );
  }

  private closeUserAudio(identity: string, sid: string | undefined): void {
    const key = `${identity}/${sid}`;
    const u = this.userAudio.get(key);
    if (!u) return;
    this.userAudio.delete(key);
    void u.close();
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

/** The sync marker on an I420 frame: white or black (limited-range luma, neutral chroma). */
function paintMarker(i420: Uint8Array, width: number, height: number, on: boolean): void {
  const { y, u, v, strideUV } = i420Planes(i420, width, height);
  for (let row = 0; row < MARKER; row++) y.fill(on ? 235 : 16, row * width, row * width + MARKER);
  for (let row = 0; row < MARKER / 2; row++) {
    u.fill(128, row * strideUV, row * strideUV + MARKER / 2);
    v.fill(128, row * strideUV, row * strideUV + MARKER / 2);
  }
}
