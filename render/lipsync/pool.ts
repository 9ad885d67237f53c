/**
 * Several lip-sync engines as one: each batch is dealt out among them, round robin from where the
 * last batch stopped (so a batch of one frame goes to each in turn, not always to the first), and
 * drawn by all at once. With each engine in its own thread, a worker's frames are drawn on
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
export async function createLipSyncThreads(choice: LipSyncChoice | string | undefined, options: LipSyncOptions, count: number): Promise<LipSyncEngine> {
  return lipSyncPool(await Promise.all(Array.from({ length: count }, () => createLipSyncThread(choice, options))));
}

export function lipSyncPool(engines: readonly LipSyncEngine[]): LipSyncEngine {
  const first = engines[0];
  if (!first) throw new RangeError('a lip-sync pool needs at least one engine');
  if (engines.length === 1) return first;
  if (engines.some((e) => e.kind !== first.kind || e.needsAudio !== first.needsAudio)) throw new TypeError('the engines of a lip-sync pool must be of one kind');
  const n = engines.length;
  /** The engine that takes the next item dealt. */
  let turn = 0;
  /** Deals a batch: per engine, the indices of its items. */
  const deal = (count: number): number[][] => {
    const shares: number[][] = engines.map(() => []);
    for (let i = 0; i < count; i++) shares[(turn + i) % n]!.push(i);
    turn = (turn + count) % n;
    return shares;
  };

  return {
    kind: first.kind,
    needsAudio: first.needsAudio,
    prepare: (rig: FaceRig) => first.prepare(rig),
    async renderFrames(items) {
      const shares = deal(items.length);
      const parts = await Promise.all(engines.map((e, k) => e.renderFrames(shares[k]!.map((i) => items[i]!))));
      const out = new Array<Uint8Array | Uint8ClampedArray>(items.length);
      shares.forEach((share, k) => share.forEach((i, j) => (out[i] = parts[k]![j]!)));
      return out;
    },
    async renderI420(items) {
      const shares = deal(items.length);
      await Promise.all(engines.map((e, k) => e.renderI420(shares[k]!.map((i) => items[i]!))));
    },
    async release() {
      await Promise.all(engines.map((e) => e.release()));
    },
  };
}
