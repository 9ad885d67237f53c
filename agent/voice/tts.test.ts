import { describe, expect, it } from 'vitest';
import { splitClauses } from './tts.ts';

describe('the embedded TTS by clauses', () => {
  it('cuts a reply after each clause and sentence end, keeping where each piece lies', () => {
    const text = 'Compilers translate code, one pass at a time. They check it; then: faster!';
    expect(splitClauses(text).map(([t]) => t)).toEqual([
      'Compilers translate code,',
      'one pass at a time.',
      'They check it;',
      'then:',
      'faster!',
    ]);
    for (const [piece, start, end] of splitClauses(text)) expect(text.slice(start, end).trim()).toBe(piece);
  });

  it('does not cut inside a number or a word, nor after a mark that ends the text still being written', () => {
    expect(splitClauses('It costs 3.50 dollars, or 1,000 cents')).toEqual([
      ['It costs 3.50 dollars,', 0, 22],
      ['or 1,000 cents', 22, 37],
    ]);
    expect(splitClauses('Half a clause,').map(([t]) => t)).toEqual(['Half a clause,']);
  });
});
