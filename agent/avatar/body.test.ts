import { describe, expect, it } from 'vitest';
import type { Availability, Behavior } from '../../clips/behavior/index.ts';
import { BehaviorBody, SceneBody, type Body } from './body.ts';
import type { ClipMedia } from './media.ts';

/** A clip of `frameCount` frames: the bodies only read its length. */
function clip(key: string, frameCount: number): ClipMedia {
  return { key, frameCount, width: 8, height: 8 } as unknown as ClipMedia;
}

describe('SceneBody', () => {
  it('loops its clip from the start', () => {
    const body = new SceneBody(clip('scene', 4), 'loop');
    expect(Array.from({ length: 10 }, (_, n) => body.frameAt(n).index)).toEqual([0, 1, 2, 3, 0, 1, 2, 3, 0, 1]);
  });

  it('plays its clip back and forth without repeating the turning frames', () => {
    const body = new SceneBody(clip('scene', 4), 'pingpong');
    expect(Array.from({ length: 13 }, (_, n) => body.frameAt(n).index)).toEqual([
      0, 1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0,
    ]);
  });

  it('holds a one-frame clip in ping-pong', () => {
    const body = new SceneBody(clip('scene', 1), 'pingpong');
    expect([0, 1, 2].map((n) => body.frameAt(n).index)).toEqual([0, 0, 0]);
  });

  it('refuses actions and ignores the user speaking', () => {
    const body: Body = new SceneBody(clip('scene', 4));
    body.userSpeechStarted();
    expect(body.frameAt(5)).toMatchObject({ index: 1, clipId: 'scene', kind: 'scene' });
    expect(body.requestAction('wave')).toEqual({ accepted: false, reason: 'no_available_take' });
  });
});

describe('BehaviorBody', () => {
  // The idle pool is the source loop alone, so every choice is known in advance.
  const behavior: Behavior = {
    on: { userSpeechStarted: { clips: ['lean_in'] } },
    actions: { wave: { description: 'Wave hello', clips: ['wave'] } },
  };
  const media: Record<string, ClipMedia> = {
    source: clip('source', 10),
    lean_in: clip('lean_in', 5),
    wave: clip('wave', 3),
  };
  const allLoaded: Availability = (id) => (id in media ? 'ready' : 'failed');
  const body = (loaded: (id: string) => ClipMedia | undefined = (id) => media[id]) =>
    new BehaviorBody(behavior, allLoaded, loaded, 1);
  const frames = (b: BehaviorBody, from: number, to: number) =>
    Array.from({ length: to - from }, (_, i) => b.frameAt(from + i)).map((f) => `${f.clipId}:${f.index}`);

  it('starts its first clip at the first frame asked for', () => {
    const b = body();
    expect(b.frameAt(7)).toMatchObject({ clipId: 'source', index: 0 });
    expect(b.frameAt(16)).toMatchObject({ clipId: 'source', index: 9 });
  });

  it('plays the idle loop whole, then again from its first frame', () => {
    const b = body();
    expect(frames(b, 0, 12)).toEqual([...Array.from({ length: 10 }, (_, i) => `source:${i}`), 'source:0', 'source:1']);
  });

  it('starts a listening reaction only at the next clip boundary, then idles again', () => {
    const b = body();
    b.frameAt(0);
    b.frameAt(3);
    b.userSpeechStarted();
    expect(b.frameAt(9)).toMatchObject({ clipId: 'source', index: 9, kind: 'idle' });
    expect(b.frameAt(10)).toMatchObject({ clipId: 'lean_in', index: 0, kind: 'reaction' });
    expect(b.frameAt(14)).toMatchObject({ clipId: 'lean_in', index: 4 });
    expect(b.frameAt(15)).toMatchObject({ clipId: 'source', index: 0, kind: 'idle' });
  });

  it('plays an accepted action at the next boundary and refuses an unknown one', () => {
    const b = body();
    b.frameAt(0);
    expect(b.requestAction('wave')).toEqual({ accepted: true });
    expect(b.requestAction('moonwalk')).toEqual({ accepted: false, reason: 'unknown_action' });
    expect(frames(b, 9, 14)).toEqual(['source:9', 'wave:0', 'wave:1', 'wave:2', 'source:0']);
  });

  it('keeps the boundaries of clips it skipped over', () => {
    const b = body();
    b.frameAt(0);
    b.userSpeechStarted();
    // The reaction is frames 10..14, the loop 15..24 and again from 25.
    expect(b.frameAt(27)).toMatchObject({ clipId: 'source', index: 2 });
  });

  it('falls back to the idle loop for a chosen clip whose media is missing', () => {
    const b = body((id) => (id === 'lean_in' ? undefined : media[id]));
    b.frameAt(0);
    b.userSpeechStarted();
    // The reaction keeps its id (it was chosen) and shows the loop's frames.
    expect(b.frameAt(10)).toMatchObject({ clipId: 'lean_in', index: 0, media: media.source });
  });
});
