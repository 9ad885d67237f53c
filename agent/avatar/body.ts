/**
 * The body of a call: which frame of which clip shows at each video frame. An avatar plays the
 * clips its behaviour engine chooses (the weighted idle pool, listening reactions, the actions the
 * LLM asks for), each whole and cut only at its end, where every clip meets the anchor pose. A
 * scene plays its one clip over and over. Speech never restarts the body: the mouth is drawn on
 * whatever frame plays.
 */
import {
  createIdleSelector,
  createReactionPicker,
  schedulerFrom,
  type Availability,
  type Behavior,
  type Play,
  type Scheduler,
  type SchedulerResult,
} from '../../clips/behavior/index.ts';
import { cycleFrames, type SceneContinuation } from '../../core/scenes/types.ts';
import type { ClipMedia } from './media.ts';

export interface BodyFrame {
  media: ClipMedia;
  /** Frame index within the clip. */
  index: number;
  clipId: string;
  kind: Play['kind'] | 'scene';
}

export type ActionAnswer = NonNullable<SchedulerResult['action']>;

export interface Body {
  /** The body's frame at video frame `n` of the call (n never decreases). */
  frameAt(n: number): BodyFrame;
  /** The user started speaking: a listening reaction plays at the next clip boundary. */
  userSpeechStarted(): void;
  /** The LLM asked for an action: accepted (it plays at the next clip boundary) or why not. */
  requestAction(actionId: string): ActionAnswer;
}

/** An avatar's body: clips chosen by its behaviour engine. `media(clipId)` is the loaded clip ('source' is the idle loop). */
export class BehaviorBody implements Body {
  private readonly scheduler: Scheduler;
  private current: { play: Play; media: ClipMedia; start: number } | null = null;

  /** `availability` must call a clip ready only once its media is loaded (`media(clipId)` returns it). */
  constructor(
    behavior: Behavior,
    availability: Availability,
    private readonly media: (clipId: string) => ClipMedia | undefined,
    seed: number,
    private readonly onPlay?: (play: Play) => void,
  ) {
    this.scheduler = schedulerFrom({
      idle: createIdleSelector(behavior, availability, seed),
      picker: createReactionPicker(behavior, availability, seed),
    });
  }

  frameAt(n: number): BodyFrame {
    if (!this.current) this.begin(this.scheduler.start(), n);
    let cur = this.current!;
    while (n - cur.start >= cur.media.frameCount) {
      const { play } = this.scheduler.handle({ type: 'clipEnded' });
      this.begin(play!, cur.start + cur.media.frameCount);
      cur = this.current!;
    }
    return { media: cur.media, index: Math.max(0, n - cur.start), clipId: cur.play.clipId, kind: cur.play.kind };
  }

  userSpeechStarted(): void {
    this.scheduler.handle({ type: 'userSpeechStarted' });
  }

  requestAction(actionId: string): ActionAnswer {
    return this.scheduler.handle({ type: 'actionRequested', actionId }).action!;
  }

  private begin(play: Play, start: number): void {
    // Availability follows loaded media, so a chosen clip is loaded; the idle loop covers a race.
    const media = this.media(play.clipId) ?? this.media('source');
    if (!media) throw new Error(`No media for clip ${play.clipId} and no idle loop to fall back to`);
    this.current = { play, media, start };
    this.onPlay?.(play);
  }
}

/** A scene's body: its one clip, continued as asked; no reactions or actions (nothing to cut to). */
export class SceneBody implements Body {
  constructor(
    private readonly media: ClipMedia,
    private readonly continuation: SceneContinuation = 'loop',
  ) {}

  frameAt(n: number): BodyFrame {
    const count = this.media.frameCount;
    // One cycle: the frames forwards (loop), or forwards then back without repeating an end (pingpong).
    const period = cycleFrames(count, this.continuation);
    const k = n % period;
    const index = k < count ? k : period - k;
    return { media: this.media, index, clipId: 'scene', kind: 'scene' };
  }

  userSpeechStarted(): void {}

  requestAction(): ActionAnswer {
    return { accepted: false, reason: 'no_available_take' };
  }
}
