import { describe, expect, it } from 'vitest';
import { orAfter } from './time.ts';

describe('orAfter: a wait with a bound', () => {
  it('gives the value when it comes in time', async () => {
    expect(await orAfter(Promise.resolve(7), 1000, 'late')).toBe(7);
  });

  it('gives the stand-in when the value does not come in time', async () => {
    expect(await orAfter(new Promise<number>(() => {}), 20, 'late')).toBe('late');
  });

  it('passes a rejection on', async () => {
    await expect(orAfter(Promise.reject(new Error('boom')), 1000, 'late')).rejects.toThrow('boom');
  });
});
