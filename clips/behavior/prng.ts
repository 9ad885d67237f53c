/**
 * A small seeded PRNG (mulberry32) and the draws the engine needs. Deterministic: the same seed
 * gives the same sequence on every platform (32-bit integer arithmetic only).
 */

export type Random = () => number;

/** mulberry32: a 32-bit state generator returning floats in [0, 1). */
export function mulberry32(seed: number): Random {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Derives an independent stream seed from a base seed and a label (FNV-1a over the label, mixed
 * with the seed), so the idle, reaction and action draws do not disturb each other.
 */
export function deriveSeed(seed: number, label: string): number {
  let h = (0x811c9dc5 ^ (seed >>> 0)) >>> 0;
  for (let i = 0; i < label.length; i++) {
    h ^= label.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return Math.imul(h ^ (h >>> 16), 0x45d9f3b) >>> 0;
}

/** Uniform choice; `items` must be nonempty. */
export function pickUniform<T>(random: Random, items: readonly T[]): T {
  if (items.length === 0) throw new RangeError('pickUniform: empty list');
  const i = Math.min(items.length - 1, Math.floor(random() * items.length));
  return items[i] as T;
}

/** Weighted choice proportional to `weight` (all positive, finite); `items` must be nonempty. */
export function pickWeighted<T>(random: Random, items: readonly { item: T; weight: number }[]): T {
  if (items.length === 0) throw new RangeError('pickWeighted: empty list');
  let total = 0;
  for (const e of items) total += e.weight;
  let r = random() * total;
  for (const e of items) {
    r -= e.weight;
    if (r < 0) return e.item;
  }
  // Floating-point residue: the last member absorbs it.
  return (items[items.length - 1] as { item: T }).item;
}
