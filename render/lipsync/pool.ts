/**
 * Several lip-sync engines as one: each batch is dealt out among them (item i to engine i mod n)
 * and drawn by all at once. With each engine in its own thread, a worker's frames are drawn on
 * several cores, and a batch takes a fraction of the time one thread needs: on a busy worker that
 * is what keeps speaking frames drawn before they fall due (docs/benchmarks.md).
 *
 *   const lipsync = await createLipSyncThreads('builtin', {}, 2);
 */
import type { FaceRig } from '../rig/types.ts';
import type { LipSyncChoice } from './contract.ts';
import type { LipSyncEngine, LipSyncOptions } from './engine.ts';
import { createLipSyncThread } from './thread.ts';

/** `count` lip-sync threads of one engine, as one engine (a pool; the thread itself when one). */
export async function createLipSyncThreads(
  choice: LipSyncChoice | string | undefined,
  options: LipSyncOptions,
  count: number,
): Promise<LipSyncEngine> {
  return lipSyncPool(await Promise.all(Array.from({ length: count }, () => createLipSyncThread(choice, options))));
}

export function lipSyncPool(engines: readonly LipSyncEngine[]): LipSyncEngine {
  const first = engines[0];
  if (!first) throw new RangeError('a lip-sync pool needs at least one engine');
  if (engines.length === 1) return first;
  if (engines.some((e) => e.kind !== first.kind || e.needsAudio !== first.needsAudio))
    throw new TypeError('the engines of a lip-sync pool must be of one kind');
  const n = engines.length;
  /** The items of engine k: every n-th, from the k-th. */
  const share = <T>(items: readonly T[], k: number) => items.filter((_, i) => i % n === k);

  return {
    kind: first.kind,
    needsAudio: first.needsAudio,
    prepare: (rig: FaceRig) => first.prepare(rig),
    async renderFrames(items) {
      const parts = await Promise.all(engines.map((e, k) => e.renderFrames(share(items, k))));
      return items.map((_, i) => parts[i % n]![Math.floor(i / n)]!);
    },
    async renderI420(items) {
      await Promise.all(engines.map((e, k) => e.renderI420(share(items, k))));
    },
    async release() {
      await Promise.all(engines.map((e) => e.release()));
    },
  };
}
