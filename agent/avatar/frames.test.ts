import { describe, expect, it } from 'vitest';
import type { Body } from './body.ts';
import { FramePipeline, type DueFrame, type FramePipelineOptions } from './frames.ts';
import type { ClipMedia } from './media.ts';

const FPS = 25;
const FRAME_MS = 1000 / FPS;

/**
 * A playout whose clock the test sets: frame `due` is due now, frames in `known` have their audio
 * and mouth settled, and audio dropped from frame `droppedFrom` on starts a new epoch.
 */
function fakePlayout() {
  const p = {
    due: 0,
    epoch: 0,
    droppedFrom: Infinity,
    known: new Set<number>(),
    frameAt: (_now?: number, lastShown = -1) => ({
      position: 0,
      frame: Math.max(p.due, lastShown),
      segmentId: null,
      mouth: null,
      level: 0,
    }),
    frameKnown: (k: number) => p.known.has(k),
    msUntilFrame: (k: number) => Math.max(0, (k - p.due) * FRAME_MS),
    frameContent: () => ({ frame: 0, segmentId: null, mouth: null, level: 0 }),
    frameCurrent: (k: number, epoch: number) => epoch === p.epoch || k < p.droppedFrom,
    frameAudio: () => null,
    /** Audio from frame `k` on is dropped (an interruption): a new epoch. */
    drop(k: number) {
      p.droppedFrom = k;
      p.epoch++;
    },
  };
  return p;
}

const body: Body = {
  frameAt: (n) => ({ media: {} as ClipMedia, index: n, clipId: 'scene', kind: 'scene' }),
  userSpeechStarted: () => {},
  requestAction: () => ({ accepted: false, reason: 'no_available_take' }),
};

function pipeline(withBody: Body = body) {
  const playout = fakePlayout();
  const options: FramePipelineOptions = {
    playout: playout as unknown as FramePipelineOptions['playout'],
    body: withBody,
    width: 16,
    height: 16,
    fps: FPS,
    sampleRate: 24_000,
    neural: false,
    syncMarker: false,
  };
  const frames = new FramePipeline(options);
  /** Everything the host would draw now, drawn. */
  const drawAll = () => {
    const drawn: number[] = [];
    for (let job: DueFrame | null; (job = frames.next(0)); drawn.push(job.frame)) frames.rendered(job, job.target);
    return drawn;
  };
  return { playout, frames, drawAll };
}

describe('FramePipeline', () => {
  it('draws the due frame and the next at once, further frames only once what they show is settled, two ahead at most', () => {
    const { playout, drawAll } = pipeline();
    expect(drawAll()).toEqual([0, 1]);
    playout.known = new Set([2, 3, 4, 5]);
    expect(drawAll()).toEqual([2]);
    playout.due = 1;
    expect(drawAll()).toEqual([3]);
  });

  it("has the clip's next frame decoded while one draws, never past the clip's end", () => {
    const asked: number[] = [];
    const media = {
      frameCount: 3,
      i420: (i: number) => {
        asked.push(i);
        return Promise.resolve(new Uint8Array(0));
      },
    } as unknown as ClipMedia;
    const { playout, drawAll } = pipeline({
      ...body,
      frameAt: (n) => ({ media, index: n % 3, clipId: 'c', kind: 'scene' }),
    });
    expect(drawAll()).toEqual([0, 1]);
    playout.known = new Set([2, 3]);
    expect(drawAll()).toEqual([2]);
    playout.due = 1;
    expect(drawAll()).toEqual([3]);
    // Frames 0, 1 and 3 (index 0) ask for the frame after; frame 2 ends the clip.
    expect(asked).toEqual([1, 2, 1]);
  });

  it('draws a frame not yet settled once it falls due within a frame: a late mouth beats a missing frame', () => {
    const { playout, frames, drawAll } = pipeline();
    expect(drawAll()).toEqual([0, 1]);
    // Frame 2 is unsettled and two frames away: it waits.
    expect(frames.next(0)).toBeNull();
    playout.due = 1;
    expect(drawAll()).toEqual([2]);
  });

  it('shows each frame once, when it is due, and nothing while the due frame is not drawn', () => {
    const { playout, frames, drawAll } = pipeline();
    playout.known = new Set([1, 2, 3, 4, 5]);
    drawAll();
    expect(frames.takeDue(0)).toMatchObject({ frame: 0, mouth: false });
    expect(frames.takeDue(0)).toBeNull();
    playout.due = 1;
    expect(frames.takeDue(0)?.frame).toBe(1);
    expect(frames.takeDue(0)).toBeNull();
    // Drawn up to frame 2 only, and 2 shown: frame 4 falls due undrawn, and nothing shows until it is drawn.
    playout.due = 2;
    expect(frames.takeDue(0)?.frame).toBe(2);
    playout.due = 4;
    expect(frames.takeDue(0)).toBeNull();
    expect(frames.lastShown).toBe(2);
    expect(drawAll()).toEqual([4, 5]);
    expect(frames.takeDue(0)).toMatchObject({ frame: 4, skipped: 1 });
  });

  it('shows a frame drawn after its time rather than none: on a machine that draws every frame late, the picture still moves', () => {
    const { playout, frames } = pipeline();
    let shown = 0;
    // Each frame takes three frames' time to draw: it is done when a later one is due.
    for (let t = 0; t < 30; t += 3) {
      playout.due = t;
      const job = frames.next(0)!;
      expect(job.frame).toBe(t);
      playout.due = t + 3;
      frames.rendered(job, job.target);
      const frame = frames.takeDue(0);
      expect(frame?.frame, 'the frame just drawn, late').toBe(t);
      if (frame) shown++;
    }
    expect(shown).toBe(10);
  });

  it('forgets frames drawn for audio that was dropped and draws them again; those before it stay', () => {
    const { playout, frames, drawAll } = pipeline();
    playout.known = new Set([1, 2, 3]);
    expect(drawAll()).toEqual([0, 1, 2]);
    playout.drop(2);
    // Frame 2 showed what no longer plays: drawn again, in the new epoch.
    const again = frames.next(0);
    expect(again).toMatchObject({ frame: 2, epoch: 1 });
    // A frame of the old epoch that arrives late is not kept; the new one is.
    frames.rendered({ ...again!, epoch: 0 }, again!.target);
    playout.due = 2;
    // Frame 1, drawn before the drop and never shown, is what there is to show until 2 is drawn again.
    expect(frames.takeDue(0)?.frame).toBe(1);
    expect(frames.takeDue(0)).toBeNull();
    frames.rendered(again!, again!.target);
    expect(frames.takeDue(0)?.frame).toBe(2);
  });

  it('knows how long until the next frame is due, and Infinity once it is', () => {
    const { playout, frames, drawAll } = pipeline();
    drawAll();
    frames.takeDue(0);
    expect(frames.msUntilNext(0)).toBe(FRAME_MS);
    playout.due = 1;
    expect(frames.msUntilNext(0)).toBe(Infinity);
  });
});
