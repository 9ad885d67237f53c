import { afterAll, describe, expect, it } from 'vitest';
import { closeTts, synthesize } from '../tts/index.ts';
import { VISEMES, VISEME_PARAMS, phoneViseme, phonesToVisemes, visemeTrack } from './index.ts';
import type { TimedPhone } from './index.ts';

afterAll(async () => {
  await closeTts();
});

// Flite's US English phone set (cmu_us phoneset), plus its silence symbols.
const FLITE_PHONES =
  'aa ae ah ao aw ax axr ay b ch d dh dx eh el em en er ey f g hh hv ih iy jh k l m n nx ng ow oy p r s sh t th uh uw v w y z zh pau h# brk'.split(
    ' ',
  );

function seq(spec: [string, number][]): TimedPhone[] {
  let t = 0;
  return spec.map(([phone, d]) => {
    const p = { phone, start: t, end: t + d };
    t += d;
    return p;
  });
}

describe('viseme set', () => {
  it('every viseme has parameters in [0, 1]; closures and openness are ordered sensibly', () => {
    for (const v of VISEMES) {
      for (const k of ['open', 'wide', 'round'] as const) {
        expect(VISEME_PARAMS[v][k]).toBeGreaterThanOrEqual(0);
        expect(VISEME_PARAMS[v][k]).toBeLessThanOrEqual(1);
      }
    }
    expect(VISEME_PARAMS.PP.open).toBe(0);
    expect(VISEME_PARAMS.sil.open).toBe(0);
    expect(VISEME_PARAMS.aa.open).toBeGreaterThan(VISEME_PARAMS.E.open);
    expect(VISEME_PARAMS.ou.round).toBeGreaterThan(VISEME_PARAMS.oh.round);
    expect(VISEME_PARAMS.ih.wide).toBeGreaterThan(VISEME_PARAMS.aa.wide);
  });

  it('maps every Flite phone, silence to sil, bilabials to PP', () => {
    for (const p of FLITE_PHONES) expect(VISEMES).toContain(phoneViseme(p));
    expect(['pau', 'h#', 'brk'].map(phoneViseme)).toEqual(['sil', 'sil', 'sil']);
    expect(['p', 'b', 'm'].map(phoneViseme)).toEqual(['PP', 'PP', 'PP']);
    expect(['f', 'v'].map(phoneViseme)).toEqual(['FF', 'FF']);
    expect(['uw', 'w'].map(phoneViseme)).toEqual(['ou', 'ou']);
    expect(phoneViseme('xyz')).toBe('sil');
  });

  it('splits diphthongs, gives h the next vowel, merges repeats', () => {
    const segs = phonesToVisemes(
      seq([
        ['pau', 0.1],
        ['hh', 0.05],
        ['ay', 0.2],
        ['p', 0.06],
        ['b', 0.04],
        ['pau', 0.1],
      ]),
    );
    expect(segs.map((s) => s.viseme)).toEqual(['sil', 'aa', 'ih', 'PP', 'sil']);
    // hh + first part of ay merged into one 'aa'; ay splits at 60%.
    expect(segs[1]!.end).toBeCloseTo(0.15 + 0.12, 9);
    expect(segs[3]!.end - segs[3]!.start).toBeCloseTo(0.1, 9);
  });
});

describe('visemeTrack (phone path)', () => {
  const phones = seq([
    ['pau', 0.3],
    ['m', 0.08],
    ['aa', 0.25],
    ['p', 0.07],
    ['uw', 0.2],
    ['b', 0.03],
    ['iy', 0.2],
    ['pau', 0.4],
  ]);
  const duration = phones[phones.length - 1]!.end;

  it('one frame per video frame, at k / fps', () => {
    for (const fps of [25, 30, 60]) {
      const t = visemeTrack(phones, fps);
      expect(t.frames.length).toBe(Math.ceil(duration * fps - 1e-9));
      t.frames.forEach((f, k) => expect(f.time).toBeCloseTo(k / fps, 9));
    }
    expect(() => visemeTrack(phones, 0)).toThrow(RangeError);
  });

  it('closes the lips during p, b, m exactly, even a 30 ms closure at 25 fps', () => {
    for (const fps of [25, 30, 50]) {
      const t = visemeTrack(phones, fps);
      for (const ph of phones.filter((p) => ['m', 'p', 'b'].includes(p.phone))) {
        const inside = t.frames.filter((f) => f.time >= ph.start && f.time < ph.end);
        const nearest = t.frames[Math.round(((ph.start + ph.end) / 2) * fps)]!;
        for (const f of [...inside, nearest]) {
          expect(f.open).toBe(0);
          expect(f.closed).toBe(true);
        }
      }
    }
  });

  it('opens for vowels with their shape, closes in silence, and moves smoothly', () => {
    const t = visemeTrack(phones, 100);
    const at = (s: number) => t.frames[Math.round(s * 100)]!;
    expect(at(0.1).open).toBeLessThan(0.01);
    expect(at(0.1).closed).toBe(true);
    expect(at(1.5).open).toBeLessThan(0.01);
    expect(at(0.5).open).toBeGreaterThan(0.55); // middle of aa
    expect(at(0.5).viseme).toBe('aa');
    expect(at(0.75).round).toBeGreaterThan(0.6); // middle of uw
    expect(at(1.03).wide).toBeGreaterThan(0.45); // middle of iy
    // Attack/release: no jump between 10 ms frames except into a bilabial closure.
    for (let k = 1; k < t.frames.length; k++) {
      const a = t.frames[k - 1]!;
      const b = t.frames[k]!;
      if (a.viseme !== 'PP' && b.viseme !== 'PP') expect(Math.abs(b.open - a.open)).toBeLessThan(0.3);
    }
    // Anticipation: the lips start rounding during the p, before uw begins at 0.70 s.
    expect(at(0.68).round).toBeGreaterThan(0.2);
  });

  it('works on real TTS timings: every p/b/m of a sentence gets a closed frame at 25 fps', async () => {
    const r = await synthesize({ text: 'Bob bought a big map, maybe by mistake.', voice: 'slt' });
    const t = visemeTrack(r.phones, 25, { durationSeconds: r.durationSeconds });
    expect(t.frames.length).toBe(Math.ceil(r.durationSeconds * 25 - 1e-9));
    const bilabials = r.phones.filter((p) => ['p', 'b', 'm'].includes(p.phone));
    expect(bilabials.length).toBeGreaterThanOrEqual(8);
    for (const p of bilabials) {
      const f = t.frames[Math.round(((p.start + p.end) / 2) * 25)]!;
      expect(f.closed).toBe(true);
    }
    expect(Math.max(...t.frames.map((f) => f.open))).toBeGreaterThan(0.5);
  });
});
