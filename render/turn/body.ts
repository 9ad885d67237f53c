import type { FrameCache } from '../framecache/index.ts';
import type { LipSyncEngine, LipSyncFace } from '../lipsync/index.ts';
import type { TurnBody } from './stream.ts';

/** A frame cache as a turn's body, with the lip-sync geometry of each frame computed once and kept. */
export interface FrameCacheBody extends TurnBody {
  readonly cache: FrameCache;
  /** Computes the geometry of every frame now (a prepare step), rather than on first use. */
  prepareFaces(): void;
}

export function frameCacheBody(cache: FrameCache, lipsync: Pick<LipSyncEngine, 'prepare'>): FrameCacheBody {
  const m = cache.manifest;
  const faces: (LipSyncFace | undefined)[] = new Array(cache.frameCount);
  const face = (i: number): LipSyncFace => (faces[i] ??= lipsync.prepare(cache.rig(i)));
  return {
    cache,
    fps: m.fps,
    width: m.width,
    height: m.height,
    frameCount: cache.frameCount,
    frame: (i) => cache.frame(i),
    jpeg: (i) => (m.codec === 'jpeg' ? cache.encoded(i) : undefined),
    face,
    prepareFaces() {
      for (let i = 0; i < cache.frameCount; i++) face(i);
    },
  };
}
