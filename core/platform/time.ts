/**
 * `p`'s value, or `late` once `ms` have passed without it, whichever comes first; the timer is
 * cleared either way. For a step that must not wait forever (a native call, a peer that went away).
 */
export async function orAfter<T, L>(p: Promise<T>, ms: number, late: L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<L>((resolve) => (timer = setTimeout(() => resolve(late), ms)));
  try {
    return await Promise.race([p, expired]);
  } finally {
    clearTimeout(timer);
  }
}
