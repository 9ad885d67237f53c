import { describe, expect, it } from 'vitest';
import { Resampler } from './audio.ts';

/** The converter's definition, sample by sample: a Blackman-windowed sinc at the lower Nyquist, normalised. */
function reference(x: Float32Array, inRate: number): Float32Array {
  const cutoff = Math.min(1, 16000 / inRate);
  const half = Math.ceil(16 / cutoff);
  const out: number[] = [];
  // Flushed, the input ends in half + 1 zeros: output up to the position one past the last sample.
  for (let k = 0; (k * inRate) / 16000 < x.length + 1; k++) {
    const pos = (k * inRate) / 16000;
    const c = Math.floor(pos);
    let acc = 0;
    let norm = 0;
    for (let i = c - half + 1; i <= c + half; i++) {
      const d = pos - i;
      const w = 0.42 + 0.5 * Math.cos((Math.PI * d) / half) + 0.08 * Math.cos((2 * Math.PI * d) / half);
      const a = Math.PI * d * cutoff;
      const h = (a === 0 ? 1 : Math.sin(a) / a) * w;
      norm += h;
      acc += (i >= 0 && i < x.length ? x[i]! : 0) * h;
    }
    out.push(acc / norm);
  }
  return Float32Array.from(out);
}

function noise(n: number): Float32Array {
  let s = 12345;
  return Float32Array.from({ length: n }, () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1);
}

function pushInChunks(r: Resampler, x: Float32Array, chunk: number): Float32Array {
  const parts: Float32Array[] = [];
  for (let i = 0; i < x.length; i += chunk) parts.push(r.push(x.subarray(i, Math.min(x.length, i + chunk))));
  parts.push(r.push(new Float32Array(0), true));
  const out = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

describe('the 16 kHz resampler', () => {
  it.each([8000, 11025, 22050, 24000, 44100, 48000, 7919])(
    'gives the windowed-sinc definition from %i Hz, whatever the chunking',
    (rate) => {
      const x = noise(Math.round(rate * 0.3));
      const want = reference(x, rate);
      for (const chunk of [x.length, 480, 97]) {
        const got = pushInChunks(new Resampler(rate), x, chunk);
        expect(got.length).toBe(want.length);
        let maxErr = 0;
        for (let i = 0; i < want.length; i++) maxErr = Math.max(maxErr, Math.abs(got[i]! - want[i]!));
        expect(maxErr, `${rate} Hz in chunks of ${chunk}`).toBeLessThan(1e-5);
      }
    },
  );

  it('keeps a tone under the new Nyquist and removes one above it', () => {
    const rate = 48000;
    const tone = (hz: number) => Float32Array.from({ length: rate }, (_, i) => Math.sin((2 * Math.PI * hz * i) / rate));
    const rms = (y: Float32Array) =>
      Math.sqrt(y.subarray(2000, y.length - 2000).reduce((a, v) => a + v * v, 0) / (y.length - 4000));
    expect(rms(new Resampler(rate).push(tone(1000), true))).toBeCloseTo(Math.SQRT1_2, 2);
    expect(rms(new Resampler(rate).push(tone(12000), true))).toBeLessThan(0.01);
  });

  it('passes 16 kHz through untouched', () => {
    const x = noise(1000);
    expect(new Resampler(16000).push(x)).toBe(x);
  });
});
