/**
 * A call's body with its media: the scene's clip, or the avatar's idle loop (enough to start) and
 * its other clips, loaded in the background, each held in the worker's media cache until the call
 * lets them go.
 */
import { createHash } from 'node:crypto';
import type { Logger } from '../../core/platform/log.ts';
import type { Availability } from '../../clips/behavior/index.ts';
import { SOURCE_MEMBER_ID } from '../../clips/behavior/index.ts';
import { BehaviorBody, SceneBody, type Body } from './body.ts';
import type { CallSpec } from './call.ts';
import type { ClipMedia, MediaCache } from './media.ts';

function seedOf(id: string): number {
  return createHash('sha256').update(id).digest().readUInt32LE(0);
}

export class BodyMedia {
  private readonly held: string[] = [];
  private readonly loaded = new Map<string, ClipMedia>();

  constructor(
    private readonly media: MediaCache,
    private readonly log: Logger,
  ) {}

  /** Loads the picture of the call's body; its clips go on loading in the background. Throws when it has none to play. */
  async load(spec: Pick<CallSpec, 'body' | 'sessionId'>): Promise<{ body: Body; width: number; height: number }> {
    const b = spec.body;
    if (b.kind === 'scene') {
      const media = await this.hold(b.cacheKey);
      return { body: new SceneBody(media, b.continuation), width: media.width, height: media.height };
    }
    const pb = b.playback;
    if (!pb.loopCacheKey) throw new Error(`Avatar ${pb.avatarId} has no idle loop to play`);
    const loop = await this.hold(pb.loopCacheKey);
    this.loaded.set(SOURCE_MEMBER_ID, loop);
    const { width, height } = loop;
    // A clip is playable here once its media is loaded: until then it counts as pending.
    const availability: Availability = (id) => {
      if (this.loaded.has(id)) return 'ready';
      const base = pb.availability(id);
      return base === 'ready' ? 'pending' : base;
    };
    const body = new BehaviorBody(
      pb.behavior,
      availability,
      (id) => this.loaded.get(id),
      seedOf(spec.sessionId),
      (play) => this.log.debug({ clipId: play.clipId, kind: play.kind }, 'clip playing'),
    );
    // Clips load in the background; the loop alone is enough to start.
    for (const clip of pb.clips.values()) {
      if (clip.availability !== 'ready' || !clip.cacheKey) continue;
      const key = clip.cacheKey;
      this.hold(key)
        .then(async (media) => {
          if (media.width !== width || media.height !== height) {
            this.log.warn({ clipId: clip.clipId }, 'clip of another size than the idle loop, not played');
            return;
          }
          this.loaded.set(clip.clipId, media);
        })
        .catch((err: unknown) => this.log.warn({ err, clipId: clip.clipId }, 'clip media could not be loaded'));
    }
    return { body, width, height };
  }

  /** Lets go of every clip held so far (the call is over). */
  release(): void {
    for (const key of this.held) this.media.release(key);
  }

  private async hold(cacheKey: string): Promise<ClipMedia> {
    const media = await this.media.acquire(cacheKey);
    this.held.push(cacheKey);
    return media;
  }
}
