import { describe, expect, it } from 'vitest';
import { newRequestId } from './ids.ts';

describe('request ids', () => {
  const ids = Array.from({ length: 5_000 }, () => newRequestId());
  const randomPart = (id: string) => id.slice('req_'.length + 9);

  it('are req_, the time in base36, then 96 random bits; all different', () => {
    for (const id of ids) expect(id).toMatch(/^req_[0-9a-z]{9}[A-Za-z0-9_-]{16}$/);
    expect(new Set(ids).size).toBe(ids.length);
    const before = Date.now();
    const id = newRequestId();
    expect(parseInt(id.slice(4, 13), 36)).toBeGreaterThanOrEqual(before);
    expect(parseInt(id.slice(4, 13), 36)).toBeLessThanOrEqual(Date.now());
  });

  it('tell nothing of the requests between two of them: consecutive ids share no more of their random part than chance', () => {
    // A counter (the ids of other tenants' requests in between) changes only its last characters.
    let differing = 0;
    for (let i = 1; i < ids.length; i++) {
      const a = randomPart(ids[i - 1]!);
      const b = randomPart(ids[i]!);
      for (let k = 0; k < 16; k++) if (a[k] !== b[k]) differing++;
    }
    // Chance: 63 in 64 characters differ.
    expect(differing / ((ids.length - 1) * 16)).toBeGreaterThan(0.95);
    // Every position of the random part takes many values (nothing fixed per process).
    for (let k = 0; k < 16; k++)
      expect(new Set(ids.map((id) => randomPart(id)[k])).size, `position ${k}`).toBeGreaterThan(50);
  });
});
