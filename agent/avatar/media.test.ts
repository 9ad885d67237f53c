import { describe, expect, it } from 'vitest';
import { DecodedFrames } from './media.ts';

describe('decoded frames of a worker', () => {
  it('keeps frames within its memory, letting the least recently played go first; a failed decode is tried again', async () => {
    const decodes: string[] = [];
    const frames = new DecodedFrames(300);
    const get = (key: string) =>
      frames.get(key, 100, async () => {
        decodes.push(key);
        if (key === 'bad') throw new Error('corrupt');
        return new Uint8Array(100);
      });
    await get('a');
    await get('b');
    await get('c');
    await get('a'); // a hit: now the most recently played
    await get('d'); // over budget: b goes (the least recently played)
    expect(frames.size).toBe(300);
    await get('a');
    await get('c');
    await get('b'); // decoded again
    expect(decodes).toEqual(['a', 'b', 'c', 'd', 'b']);
    expect(frames.size).toBe(300);

    await expect(get('bad')).rejects.toThrow('corrupt');
    await expect(get('bad')).rejects.toThrow('corrupt');
    expect(decodes.filter((k) => k === 'bad')).toHaveLength(2);
    expect(frames.size).toBeLessThanOrEqual(300);
  });

  it('shares one decode between calls that ask for a frame at once', async () => {
    let decodes = 0;
    const frames = new DecodedFrames(1000);
    const decode = async () => {
      decodes++;
      return new Uint8Array(10);
    };
    const [x, y] = await Promise.all([frames.get('k', 10, decode), frames.get('k', 10, decode)]);
    expect(x).toBe(y);
    expect(decodes).toBe(1);
  });
});
