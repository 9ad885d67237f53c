import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  chromaAligned,
  i420Planes,
  i420RectToRgba,
  i420Size,
  i420ToRgba,
  rgbaRectToI420,
  rgbaToI420,
} from './frames.ts';

function solid(w: number, h: number, [r, g, b]: [number, number, number]): Uint8Array {
  const out = new Uint8Array(w * h * 4);
  for (let i = 0; i < out.length; i += 4) {
    out[i] = r;
    out[i + 1] = g;
    out[i + 2] = b;
    out[i + 3] = 255;
  }
  return out;
}

/** BT.601 limited range from the exact (real-valued) definition. */
function exactYuv(r: number, g: number, b: number): [number, number, number] {
  const y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255;
  const u = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255;
  const v = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255;
  return [y, u, v];
}

describe('rgbaToI420 / i420ToRgba (BT.601 limited range)', () => {
  it('maps the reference colours to their textbook values', () => {
    const cases: [string, [number, number, number], [number, number, number]][] = [
      ['black', [0, 0, 0], [16, 128, 128]],
      ['white', [255, 255, 255], [235, 128, 128]],
      ['red', [255, 0, 0], [82, 90, 240]],
      ['green', [0, 255, 0], [145, 54, 34]],
      ['blue', [0, 0, 255], [41, 240, 110]],
      ['mid grey', [128, 128, 128], [126, 128, 128]],
    ];
    for (const [name, rgb, yuv] of cases) {
      const p = i420Planes(rgbaToI420(solid(4, 2, rgb), 4, 2), 4, 2);
      const got = [p.y[0]!, p.u[0]!, p.v[0]!];
      for (let k = 0; k < 3; k++)
        expect(Math.abs(got[k]! - yuv[k]!), `${name} channel ${k}: ${got}`).toBeLessThanOrEqual(1);
      expect(p.y.every((v) => v === got[0])).toBe(true);
    }
  });

  it('stays within one code of the exact BT.601 formulas for any colour', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 255 }),
        fc.integer({ min: 0, max: 255 }),
        fc.integer({ min: 0, max: 255 }),
        (r, g, b) => {
          const p = i420Planes(rgbaToI420(solid(2, 2, [r, g, b]), 2, 2), 2, 2);
          const [y, u, v] = exactYuv(r, g, b);
          expect(Math.abs(p.y[0]! - y)).toBeLessThanOrEqual(1);
          expect(Math.abs(p.u[0]! - u)).toBeLessThanOrEqual(1);
          expect(Math.abs(p.v[0]! - v)).toBeLessThanOrEqual(1);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('round-trips colours within 3 codes per channel where chroma is uniform per 2x2 block', () => {
    let worst = 0;
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255)), { minLength: 64, maxLength: 64 }),
        (cw, ch, palette) => {
          const w = cw * 2;
          const h = ch * 2;
          const rgba = new Uint8Array(w * h * 4);
          for (let y = 0; y < h; y++) {
            for (let x = 0; x < w; x++) {
              const [r, g, b] = palette[((y >> 1) * 8 + (x >> 1)) % 64]!;
              rgba.set([r, g, b, 255], (y * w + x) * 4);
            }
          }
          const back = i420ToRgba(rgbaToI420(rgba, w, h), w, h);
          for (let i = 0; i < rgba.length; i++) {
            const d = Math.abs(back[i]! - rgba[i]!);
            if (d > worst) worst = d;
          }
          expect(worst).toBeLessThanOrEqual(3);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps luma detail exact-ish on greyscale images of any size, odd sizes included', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 13 }), fc.integer({ min: 1, max: 13 }), fc.integer(), (w, h, seed) => {
        const rgba = new Uint8Array(w * h * 4);
        for (let i = 0; i < w * h; i++) {
          const g = (Math.imul(seed ^ i, 2654435761) >>> 24) & 0xff;
          rgba.set([g, g, g, 255], i * 4);
        }
        const yuv = rgbaToI420(rgba, w, h);
        expect(yuv.length).toBe(i420Size(w, h));
        const p = i420Planes(yuv, w, h);
        // Grey has no chroma at all.
        expect(p.u.every((v) => v === 128) && p.v.every((v) => v === 128)).toBe(true);
        const back = i420ToRgba(yuv, w, h);
        for (let i = 0; i < rgba.length; i++) {
          expect(Math.abs(back[i]! - rgba[i]!)).toBeLessThanOrEqual(i % 4 === 3 ? 0 : 1);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('averages chroma over each 2x2 block and clamps out-of-gamut YUV on the way back', () => {
    // Left column pure red, right column pure blue: one chroma sample, the average colour.
    const rgba = new Uint8Array([255, 0, 0, 255, 0, 0, 255, 255, 255, 0, 0, 255, 0, 0, 255, 255]);
    const p = i420Planes(rgbaToI420(rgba, 2, 2), 2, 2);
    const [, u, v] = exactYuv(128, 0, 128);
    expect(Math.abs(p.u[0]! - u)).toBeLessThanOrEqual(1);
    expect(Math.abs(p.v[0]! - v)).toBeLessThanOrEqual(1);

    // Y=16, U=V=0: red and blue go below 0. Y=U=V=255: red and blue go above 255.
    expect(Array.from(i420ToRgba(new Uint8Array([16, 16, 16, 16, 0, 0]), 2, 2).subarray(0, 4))).toEqual([
      0, 154, 0, 255,
    ]);
    const rgb = i420ToRgba(new Uint8Array(6).fill(255), 2, 2);
    expect(Array.from(rgb.subarray(0, 4))).toEqual([255, 125, 255, 255]);
    expect(rgb.every((x) => x >= 0 && x <= 255)).toBe(true);
  });

  it('writes into a given buffer and checks sizes', () => {
    const out = new Uint8Array(i420Size(3, 3));
    expect(rgbaToI420(solid(3, 3, [1, 2, 3]), 3, 3, out)).toBe(out);
    expect(() => rgbaToI420(new Uint8Array(10), 3, 3)).toThrow(/expected 36/);
    expect(() => i420ToRgba(new Uint8Array(10), 3, 3)).toThrow(/expected 17/);
    expect(() => rgbaToI420(solid(3, 3, [0, 0, 0]), 3, 3, new Uint8Array(5))).toThrow(RangeError);
  });
});

describe('rect conversions (the lip-sync region of a frame)', () => {
  const noise = (n: number, seed: number) =>
    Uint8Array.from({ length: n }, (_, i) => ((i * 2654435761 + seed) >>> 13) & 255);

  it('widens a rect to whole chroma samples inside the frame', () => {
    expect(chromaAligned({ x: 3.5, y: 1, width: 4, height: 4.2 }, 9, 7)).toEqual({ x: 2, y: 0, width: 6, height: 6 });
    expect(chromaAligned({ x: -5, y: 5, width: 20, height: 10 }, 9, 7)).toEqual({ x: 0, y: 4, width: 9, height: 3 });
    expect(chromaAligned({ x: 20, y: 0, width: 5, height: 5 }, 9, 7).width).toBe(0);
  });

  it('converts exactly what the whole-frame conversion gives inside the rect, and nothing outside it (odd sizes included)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 23 }),
        fc.integer({ min: 1, max: 19 }),
        fc.integer({ min: -4, max: 24 }),
        fc.integer({ min: -4, max: 20 }),
        fc.integer({ min: 0, max: 30 }),
        fc.integer({ min: 0, max: 30 }),
        (w, h, x, y, rw, rh) => {
          const rect = { x, y, width: rw, height: rh };
          const inside = chromaAligned(rect, w, h);
          const isIn = (px: number, py: number) =>
            px >= inside.x && px < inside.x + inside.width && py >= inside.y && py < inside.y + inside.height;

          const rgba = noise(w * h * 4, 1);
          const full = rgbaToI420(rgba, w, h);
          const before = noise(i420Size(w, h), 2);
          const i420 = before.slice();
          rgbaRectToI420(rgba, w, h, rect, i420);
          const p = i420Planes(i420, w, h);
          const pf = i420Planes(full, w, h);
          const pb = i420Planes(before, w, h);
          for (let py = 0; py < h; py++)
            for (let px = 0; px < w; px++) expect(p.y[py * w + px]).toBe((isIn(px, py) ? pf : pb).y[py * w + px]);
          for (let cy = 0; cy < p.chromaHeight; cy++) {
            for (let cx = 0; cx < p.chromaWidth; cx++) {
              const k = cy * p.chromaWidth + cx;
              const from = isIn(2 * cx, 2 * cy) ? pf : pb;
              expect([p.u[k], p.v[k]]).toEqual([from.u[k], from.v[k]]);
            }
          }

          const src = noise(i420Size(w, h), 3);
          const fullRgba = i420ToRgba(src, w, h);
          const out = noise(w * h * 4, 4);
          const untouched = out.slice();
          i420RectToRgba(src, w, h, rect, out);
          for (let py = 0; py < h; py++) {
            for (let px = 0; px < w; px++) {
              const o = (py * w + px) * 4;
              expect(Array.from(out.subarray(o, o + 4))).toEqual(
                Array.from((isIn(px, py) ? fullRgba : untouched).subarray(o, o + 4)),
              );
            }
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
