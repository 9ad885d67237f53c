import { initializeLogger } from '@livekit/agents';
import { afterAll, describe, expect, it } from 'vitest';
import { closeTts, synthesize } from '../../render/tts/index.ts';
import { EmbeddedTTS, splitClauses } from './tts.ts';

initializeLogger({ pretty: false, level: 'fatal' });
afterAll(() => closeTts());

const firstAudibleMs = (samples: Int16Array, sampleRate: number) =>
  (samples.findIndex((v) => Math.abs(v) > 300) * 1000) / sampleRate;

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

describe('the embedded TTS in a call', () => {
  it("starts a reply's voice within 40 ms, where Flite opens it with a pause, in frames few enough to reach the avatar at once", async () => {
    const text = 'Compilers translate the code you write into instructions,';
    const raw = await synthesize({ text, voice: 'slt' });
    expect(firstAudibleMs(raw.samples, raw.sampleRate)).toBeGreaterThan(120);

    const frames = [];
    for await (const ev of new EmbeddedTTS().synthesize(text)) frames.push(ev.frame);
    const first = frames[0]!;
    expect(firstAudibleMs(first.data, first.sampleRate)).toBeLessThanOrEqual(40);
    // 300 ms frames but the last, and the speech itself kept whole.
    for (const f of frames.slice(0, -1)) expect(f.samplesPerChannel).toBe(0.3 * f.sampleRate);
    const kept = frames.reduce((n, f) => n + f.samplesPerChannel, 0);
    const lead = Math.round((firstAudibleMs(raw.samples, raw.sampleRate) * raw.sampleRate) / 1000);
    expect(kept).toBeGreaterThanOrEqual(raw.samples.length - lead);
    expect(kept).toBeLessThanOrEqual(raw.samples.length - lead + 0.04 * raw.sampleRate);
  });
});
