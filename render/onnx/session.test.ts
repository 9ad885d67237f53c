import { describe, expect, it } from 'vitest';
import { loadedOnce } from './session.ts';

describe('loadedOnce', () => {
  it('shares one load between concurrent first callers, and keeps it', async () => {
    let loads = 0;
    const once = loadedOnce(async () => ++loads, async () => {});
    expect(await Promise.all([once.get(), once.get()])).toEqual([1, 1]);
    expect(await once.get()).toBe(1);
    expect(loads).toBe(1);
  });

  it('does not keep a failed load: the next call loads again', async () => {
    let loads = 0;
    const once = loadedOnce(async () => {
      if (++loads === 1) throw new Error('model file missing');
      return loads;
    }, async () => {});
    await expect(once.get()).rejects.toThrow('model file missing');
    expect(await once.get()).toBe(2);
  });

  it('release disposes of the loaded value; the next call loads it again', async () => {
    let loads = 0;
    const disposed: number[] = [];
    const once = loadedOnce(async () => ++loads, async (v) => void disposed.push(v));
    await once.release();
    expect(disposed).toEqual([]);
    expect(await once.get()).toBe(1);
    await once.release();
    expect(disposed).toEqual([1]);
    expect(await once.get()).toBe(2);
  });
});
