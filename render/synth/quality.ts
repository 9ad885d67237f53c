/**
 * Measures of the mouth's picture, for the tests that hold it (picture.test.ts) and the gallery
 * (examples/make-gallery.ts): CIE Lab colour of the drawn teeth and cavity against the portrait's
 * skin and own darks, edge strength and grain in the mouth, the lips' colour and texture against the
 * source's, the drawn layer's coverage. Lab assumes sRGB and D65.
 */
import type { MouthShape } from './contract.ts';
import type { MouthSynth } from './engine.ts';
import { compositeWarp, type RgbaFrame } from './image.ts';
import { fromCrop, type PreparedFace } from './prepare.ts';

interface Rect {
  left: number;
  top: number;
  width: number;
  height: number;
}

export type Lab = [number, number, number];

function linear(c: number): number {
  const v = c / 255;
  return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
}

/** CIE L*a*b* (D65) of an sRGB pixel. */
export function toLab(r: number, g: number, b: number): Lab {
  const [R, G, B] = [linear(r), linear(g), linear(b)];
  const f = (t: number) => (t > 216 / 24389 ? Math.cbrt(t) : (t * 24389) / 27 / 116 + 16 / 116);
  const x = f((0.4124 * R + 0.3576 * G + 0.1805 * B) / 0.95047);
  const y = f(0.2126 * R + 0.7152 * G + 0.0722 * B);
  const z = f((0.0193 * R + 0.1192 * G + 0.9505 * B) / 1.08883);
  return [116 * y - 16, 500 * (x - y), 200 * (y - z)];
}

export const chroma = (c: Lab): number => Math.hypot(c[1], c[2]);
/** Hue angle in degrees, 0..360. */
export const hue = (c: Lab): number => ((Math.atan2(c[2], c[1]) * 180) / Math.PI + 360) % 360;
export const hueDistance = (a: number, b: number): number => Math.min(Math.abs(a - b), 360 - Math.abs(a - b));

function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.round(q * (s.length - 1))))]!;
}

/** A key point of the face (index into SYNTH_KEYPOINTS) in frame pixels. */
export function keyPoint(face: PreparedFace, k: number): { x: number; y: number } {
  return fromCrop(face.box, { x: face.lips[2 * k]!, y: face.lips[2 * k + 1]! });
}

/** The lips' bounding box (outer loop) grown by `grow` mouth widths each side, in frame pixels. */
function mouthBox(face: PreparedFace, grow = 0.2): Rect {
  let [x0, x1, y0, y1] = [Infinity, -Infinity, Infinity, -Infinity];
  for (let k = 20; k < 40; k++) {
    const p = keyPoint(face, k);
    [x0, x1, y0, y1] = [Math.min(x0, p.x), Math.max(x1, p.x), Math.min(y0, p.y), Math.max(y1, p.y)];
  }
  const g = grow * face.mouthWidth;
  const left = Math.max(0, Math.floor(x0 - g));
  const top = Math.max(0, Math.floor(y0 - g));
  return {
    left,
    top,
    width: Math.min(face.imageSize.width, Math.ceil(x1 + g)) - left,
    height: Math.min(face.imageSize.height, Math.ceil(y1 + g)) - top,
  };
}

/** Rec. 601 luma of the pixel at byte offset i of RGBA data. */
export const luma = (d: ArrayLike<number>, i: number): number => 0.299 * d[i]! + 0.587 * d[i + 1]! + 0.114 * d[i + 2]!;

/** Sobel magnitude of luma at each pixel of `rect` (row-major, rect-sized). */
function sobel(frame: RgbaFrame, rect: Rect): Float32Array {
  const { width, height, data } = frame;
  const out = new Float32Array(rect.width * rect.height);
  const at = (x: number, y: number) =>
    luma(data, (Math.min(height - 1, Math.max(0, y)) * width + Math.min(width - 1, Math.max(0, x))) * 4);
  for (let y = 0; y < rect.height; y++) {
    for (let x = 0; x < rect.width; x++) {
      const [px, py] = [rect.left + x, rect.top + y];
      const gx =
        at(px + 1, py - 1) +
        2 * at(px + 1, py) +
        at(px + 1, py + 1) -
        at(px - 1, py - 1) -
        2 * at(px - 1, py) -
        at(px - 1, py + 1);
      const gy =
        at(px - 1, py + 1) +
        2 * at(px, py + 1) +
        at(px + 1, py + 1) -
        at(px - 1, py - 1) -
        2 * at(px, py - 1) -
        at(px + 1, py - 1);
      out[y * rect.width + x] = Math.hypot(gx, gy);
    }
  }
  return out;
}

/** Luma minus its 3x3 mean at each of the given pixel indices (y * width + x), the frame's edge skipped. */
function residuals(frame: RgbaFrame, pixels: readonly number[]): number[] {
  const { width, height, data } = frame;
  const r: number[] = [];
  for (const p of pixels) {
    const [x, y] = [p % width, Math.floor(p / width)];
    if (x < 1 || y < 1 || x >= width - 1 || y >= height - 1) continue;
    let m = 0;
    for (let dy = -1; dy <= 1; dy++) for (let dx = -1; dx <= 1; dx++) m += luma(data, ((y + dy) * width + x + dx) * 4);
    r.push(luma(data, p * 4) - m / 9);
  }
  return r;
}

/** Grain: the standard deviation of luma minus its 3x3 mean, over the given pixel indices (y * width + x). */
export function grain(frame: RgbaFrame, pixels: readonly number[]): number {
  const r = residuals(frame, pixels);
  const mean = r.reduce((s, v) => s + v, 0) / Math.max(1, r.length);
  return Math.sqrt(r.reduce((s, v) => s + (v - mean) ** 2, 0) / Math.max(1, r.length));
}

/**
 * Fine grain, robustly: the median absolute difference of luma from its 3x3 mean over the given pixels, as a
 * standard deviation (x 1.4826), so that a few edges among them do not count.
 */
export function fineGrain(frame: RgbaFrame, pixels: readonly number[]): number {
  return quantile(residuals(frame, pixels).map(Math.abs), 0.5) * 1.4826;
}

/**
 * The photograph's own grain at the light of skin (luma 255): the least fineGrain over the root of the light
 * among five 8x8 skin patches, below the lower lip and beside the corners (the others hold pores, wrinkles, a
 * beard, an edge). A photograph's grain grows with the root of the light, so at luma L it is this x sqrt(L / 255).
 */
export function photoGrain(frame: RgbaFrame, face: PreparedFace): number {
  const W = face.mouthWidth;
  const [right, left, lower, chin] = [20, 30, 35, 40].map((k) => keyPoint(face, k));
  const [xc, ym, ySkin] = [(right!.x + left!.x) / 2, (right!.y + left!.y) / 2, lower!.y + 0.45 * (chin!.y - lower!.y)];
  const [x0, x1] = [Math.min(right!.x, left!.x), Math.max(right!.x, left!.x)];
  const centres = [
    [xc, ySkin],
    [xc - 0.15 * W, ySkin],
    [xc + 0.15 * W, ySkin],
    [x0 - 0.17 * W, ym + 0.1 * W],
    [x1 + 0.17 * W, ym + 0.1 * W],
  ] as const;
  return Math.min(
    ...centres.map(([cx, cy]) => {
      const patch = rectPixels(frame, { left: Math.round(cx) - 4, top: Math.round(cy) - 4, width: 8, height: 8 });
      const light = patch.reduce((s, p) => s + luma(frame.data, p * 4), 0) / patch.length;
      return fineGrain(frame, patch) / Math.sqrt(Math.max(light, 10) / 255);
    }),
  );
}

/** Median Lab of the given pixels. */
export function medianLab(frame: RgbaFrame, pixels: readonly number[]): Lab {
  const labs = pixels.map((p) => toLab(frame.data[p * 4]!, frame.data[p * 4 + 1]!, frame.data[p * 4 + 2]!));
  return [0, 1, 2].map((c) =>
    quantile(
      labs.map((l) => l[c]!),
      0.5,
    ),
  ) as Lab;
}

function rectPixels(frame: { width: number }, rect: Rect): number[] {
  const out: number[] = [];
  for (let y = rect.top; y < rect.top + rect.height; y++)
    for (let x = rect.left; x < rect.left + rect.width; x++) out.push(y * frame.width + x);
  return out;
}

/**
 * The drawn layer's coverage at every frame pixel (0..1) for this frame, face and shape: the graph's
 * layers composited once over black and once over white; the difference is 1 - coverage.
 */
export async function drawnCoverage(
  synth: MouthSynth,
  frame: RgbaFrame,
  face: PreparedFace,
  shape: MouthShape,
): Promise<Float32Array> {
  const { width, height } = frame;
  const alpha = new Float32Array(width * height);
  const drawn = await synth.layers(frame, face, shape);
  if (!drawn) return alpha;
  const over = (level: number) => {
    const plain = { width, height, data: new Uint8Array(width * height * 4).fill(level) };
    const target = new Uint8Array(plain.data);
    compositeWarp(plain, target, face.box, drawn.S, drawn.layers);
    return target;
  };
  const [black, white] = [over(0), over(255)];
  for (let p = 0; p < alpha.length; p++) alpha[p] = 1 - (white[p * 4 + 1]! - black[p * 4 + 1]!) / 255;
  return alpha;
}

/**
 * How dark a line runs between the opening and the lower lip (the closed mouth's crease carried down
 * with the lip reads as a painted outline): per column of the middle half of the mouth, how far the
 * darkest luma within 0.08 mouth widths below the opening's last pixel covered at least `opaque`
 * falls below the lower of its two sides (that pixel, and the lip at the end of that span); the median
 * over the columns, in levels (0 when there is no valley). At 0.9 the span starts inside the drawn
 * opening, so a rim under its soft edge counts too.
 */
export function lowerLipValley(out: RgbaFrame, face: PreparedFace, coverage: Float32Array, opaque = 0.5): number {
  const at = (x: number, y: number) => luma(out.data, (y * out.width + x) * 4);
  const [a, b] = [keyPoint(face, 20), keyPoint(face, 30)];
  const span = Math.max(2, Math.round(0.08 * face.mouthWidth));
  const box = mouthBox(face);
  const depths: number[] = [];
  for (let x = Math.round(a.x + (b.x - a.x) / 4); x <= Math.round(b.x - (b.x - a.x) / 4); x++) {
    let last = -1;
    for (let y = box.top; y < box.top + box.height; y++) if (coverage[y * out.width + x]! >= opaque) last = y;
    if (last < 0 || last + span >= out.height) continue;
    let darkest = Infinity;
    for (let y = last + 1; y < last + span; y++) darkest = Math.min(darkest, at(x, y));
    depths.push(Math.max(0, Math.min(at(x, last), at(x, last + span)) - darkest));
  }
  return depths.length ? quantile(depths, 0.5) : 0;
}

/** The graph's backward warp for this frame and shape, planes du and dv in crop pixels (null: nothing moves). */
export async function warpPlanes(synth: MouthSynth, frame: RgbaFrame, face: PreparedFace, shape: MouthShape) {
  const drawn = await synth.layers(frame, face, shape);
  if (!drawn) return null;
  const { S, layers } = drawn;
  const { w, warp, warpOffset, warpAt } = layers;
  const du = warp.subarray(warpOffset, warpOffset + w * w);
  const dv = warp.subarray(warpOffset + w * w, warpOffset + 2 * w * w);
  /** Key point k in crop pixels. */
  const point = (k: number) => ({ x: face.lips[2 * k]! * S, y: face.lips[2 * k + 1]! * S });
  return { w, warpAt, du, dv, point };
}

export type WarpPlanes = Awaited<ReturnType<typeof warpPlanes>>;

/**
 * How much the warp shears the skin below the lower lip (where a beard's strands turn into lines):
 * across each row of the warp, how fast the vertical motion changes from column to column (pixels per
 * pixel), at the 99.5th percentile over the skin from just below the portrait's lower lip down to 0.4
 * mouth widths below it, within 1.3 half widths of the middle. Measured in the graph's own crop, where
 * the mouth lies level (`warpPlanes`); 0 for a shape that moves nothing.
 */
export function skinShear(planes: WarpPlanes): number {
  return underLowerLip(planes, (dv, at) => Math.abs(dv[at + 1]! - dv[at - 1]!) / 2);
}

/**
 * A seam in the skin below the lower lip: a step in the vertical motion from one column to the next,
 * beyond the slope around it. The same skin as `skinShear`, each column's shear less the mean shear
 * over 0.15 half widths either side (at least 3 px): a lip that moves more at its middle than at its
 * ends stretches the skin below it evenly and scores about 0, where a band of columns that moves as
 * one piece beside columns that do not scores about half its step. Pixels per pixel, 99.5th percentile.
 */
export function skinSeam(planes: WarpPlanes): number {
  return underLowerLip(planes, (dv, at, reach) => {
    const narrow = Math.abs(dv[at + 1]! - dv[at - 1]!) / 2;
    const wide = Math.abs(dv[at + reach]! - dv[at - reach]!) / (2 * reach);
    return narrow - wide;
  });
}

/** A measure of the warp's vertical motion at each pixel of the skin below the lower lip, its 99.5th percentile. */
function underLowerLip(planes: WarpPlanes, measure: (dv: Float32Array, at: number, reach: number) => number): number {
  if (!planes) return 0;
  const { w, warpAt, du, dv, point } = planes;
  // the outer lower lip, corner to corner, in crop pixels
  const lip = [20, 31, 32, 33, 34, 35, 36, 37, 38, 39, 30].map(point).sort((a, b) => a.x - b.x);
  const lipAt = (x: number) => {
    const i = lip.findIndex((p) => p.x >= x);
    if (i <= 0) return lip[i === 0 ? 0 : lip.length - 1]!.y;
    const [a, b] = [lip[i - 1]!, lip[i]!];
    return a.y + ((b.y - a.y) * (x - a.x)) / (b.x - a.x || 1);
  };
  const half = (lip[lip.length - 1]!.x - lip[0]!.x) / 2;
  const middle = (lip[0]!.x + lip[lip.length - 1]!.x) / 2;
  const reach = Math.max(3, Math.round(0.15 * half));
  const values: number[] = [];
  for (let r = 0; r < w; r++) {
    for (let c = reach; c + reach < w; c++) {
      const [x, y] = [c + warpAt + 0.5, r + warpAt + 0.5];
      if (Math.abs(x - middle) > 1.3 * half) continue;
      const below = y + dv[r * w + c]! - lipAt(x + du[r * w + c]!); // where this pixel comes from
      if (below < 1 || below > 0.8 * half) continue;
      values.push(measure(dv, r * w + c, reach));
    }
  }
  values.sort((a, b) => a - b);
  return values.length ? values[Math.floor(values.length * 0.995)]! : 0;
}

/**
 * How sharply the warp tears the cheeks beside the mouth (a smile's nasolabial folds broken into steps):
 * from row to row, how much the horizontal motion changes (pixels per pixel), its maximum over the skin
 * from 1.05 to 1.6 half widths out from the middle and within half a mouth width of the corners' line.
 * Measured in the graph's own crop, where the mouth lies level (`warpPlanes`); 0 for a shape that moves nothing.
 */
export function cheekTear(planes: WarpPlanes): number {
  if (!planes) return 0;
  const { w, warpAt, du, point } = planes;
  const [a, b] = [point(20), point(30)];
  const half = Math.abs(b.x - a.x) / 2;
  const [mx, my] = [(a.x + b.x) / 2, (a.y + b.y) / 2];
  let tear = 0;
  for (let r = 0; r + 1 < w; r++) {
    if (Math.abs(r + warpAt + 0.5 - my) > half) continue;
    for (let c = 0; c < w; c++) {
      const out = Math.abs(c + warpAt + 0.5 - mx) / half;
      if (out < 1.05 || out > 1.6) continue;
      tear = Math.max(tear, Math.abs(du[(r + 1) * w + c]! - du[r * w + c]!));
    }
  }
  return tear;
}

function inPolygon(poly: readonly { x: number; y: number }[], x: number, y: number): boolean {
  let inside = false;
  for (let i = 0, j = poly.length - 1; i < poly.length; j = i++) {
    const [a, b] = [poly[i]!, poly[j]!];
    if (a.y > y !== b.y > y && x < ((b.x - a.x) * (y - a.y)) / (b.y - a.y) + a.x) inside = !inside;
  }
  return inside;
}

/**
 * The lips' pixels (inside the outer lip loop, outside the inner one) of a rig's frame, at least
 * `inset` pixels inside both lines (so a lip line a pixel off does not mix skin or teeth in).
 */
export function lipPixels(
  frame: { width: number; height: number },
  lips: { outer: readonly { x: number; y: number }[]; inner: readonly { x: number; y: number }[] },
  inset = 0,
): number[] {
  const xs = lips.outer.map((p) => p.x);
  const ys = lips.outer.map((p) => p.y);
  const out: number[] = [];
  for (
    let y = Math.max(0, Math.floor(Math.min(...ys)));
    y <= Math.min(frame.height - 1, Math.ceil(Math.max(...ys)));
    y++
  ) {
    for (
      let x = Math.max(0, Math.floor(Math.min(...xs)));
      x <= Math.min(frame.width - 1, Math.ceil(Math.max(...xs)));
      x++
    ) {
      const lip = (dx: number, dy: number) =>
        inPolygon(lips.outer, x + 0.5 + dx, y + 0.5 + dy) && !inPolygon(lips.inner, x + 0.5 + dx, y + 0.5 + dy);
      if (lip(0, 0) && (inset === 0 || (lip(0, -inset) && lip(0, inset) && lip(-inset, 0) && lip(inset, 0))))
        out.push(y * frame.width + x);
    }
  }
  return out;
}

/**
 * Edge strength along the opening's lips: the Sobel magnitude of luma at the first and the last drawn
 * pixel (coverage >= 0.5) of each column of the mouth box, its 90th percentile; and the same measure
 * along the source's own lip lines (the outer lip loop and the line between the lips, from the rig).
 */
export function lipContourEdges(
  out: RgbaFrame,
  source: RgbaFrame,
  face: PreparedFace,
  coverage: Float32Array,
  lips: { outer: readonly { x: number; y: number }[]; inner: readonly { x: number; y: number }[] },
): { out: number; source: number } {
  const box = mouthBox(face);
  const at = (frame: RgbaFrame, x: number, y: number) => {
    const s = sobel(frame, { left: x - 1, top: y - 1, width: 3, height: 3 });
    return Math.max(...s);
  };
  const mine: number[] = [];
  for (let x = box.left; x < box.left + box.width; x++) {
    let [first, last] = [-1, -1];
    for (let y = box.top; y < box.top + box.height; y++)
      if (coverage[y * out.width + x]! >= 0.5) [first, last] = [first < 0 ? y : first, y];
    if (first >= 0) mine.push(at(out, x, first), at(out, x, last));
  }
  const theirs = [...lips.outer, ...lips.inner].map((p) => at(source, Math.round(p.x), Math.round(p.y)));
  return { out: quantile(mine, 0.9), source: quantile(theirs, 0.9) };
}

/** CIE76 colour difference. */
export const deltaE = (a: Lab, b: Lab): number => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);

export interface MouthPicture {
  /** Median Lab of the drawn teeth (opaque drawn pixels within 18 L* of the brightest), or null when none show. */
  teeth: { lab: Lab; lightnessStd: number; pixels: number; grain: number } | null;
  /** The drawn cavity (opaque drawn pixels within 12 L* of the darkest): its 10th-percentile L*, median Lab. */
  cavity: { p10: number; lab: Lab; pixels: number } | null;
  /**
   * Holes in the drawn opening: of the pixels between the first and the last opaque (coverage >= 0.9)
   * pixel of each column, the share covered less than 0.9 (0 for an opaque opening).
   */
  translucent: number;
  /** 99th percentile Sobel magnitude of luma in the mouth box, output and source. */
  edges: { out: number; source: number };
}

/**
 * Of a source frame: the skin below the mouth (median Lab), and the portrait's own darks, lit as the
 * mouth is: the darkest 2% around the nostrils or of the mouth itself (a closed mouth's crease, an open
 * one's corners), whichever is darker.
 */
export function references(frame: RgbaFrame, face: PreparedFace): { skin: Lab; dark: Lab; skinGrain: number } {
  const W = face.mouthWidth;
  const chin = keyPoint(face, 40);
  const lower = keyPoint(face, 35);
  const nose = keyPoint(face, 41);
  const skinRect = {
    left: Math.round(lower.x - 0.3 * W),
    top: Math.round(lower.y + 0.35 * (chin.y - lower.y)),
    width: Math.round(0.6 * W),
    height: Math.max(2, Math.round(0.3 * (chin.y - lower.y))),
  };
  const skin = rectPixels(frame, skinRect);
  const noseRect = {
    left: Math.round(nose.x - 0.35 * W),
    top: Math.round(nose.y - 0.25 * W),
    width: Math.round(0.7 * W),
    height: Math.round(0.25 * W),
  };
  const darkest = (pixels: number[]) => {
    const sorted = pixels.sort((a, b) => luma(frame.data, a * 4) - luma(frame.data, b * 4));
    return medianLab(frame, sorted.slice(0, Math.max(3, Math.round(sorted.length * 0.02))));
  };
  const [nostrils, mouth] = [darkest(rectPixels(frame, noseRect)), darkest(rectPixels(frame, mouthBox(face, 0)))];
  return {
    skin: medianLab(frame, skin),
    dark: nostrils[0] < mouth[0] ? nostrils : mouth,
    skinGrain: grain(frame, skin),
  };
}

/** The drawn teeth and cavity of an output frame, given its source and the drawn layer's coverage. */
export function mouthPicture(
  out: RgbaFrame,
  source: RgbaFrame,
  face: PreparedFace,
  coverage: Float32Array,
): MouthPicture {
  const box = mouthBox(face);
  const pixels = rectPixels(out, box);
  const opaque = pixels.filter((p) => coverage[p]! >= 0.9);
  let [inside, holes] = [0, 0];
  for (let x = box.left; x < box.left + box.width; x++) {
    let [first, last] = [-1, -1];
    for (let y = box.top; y < box.top + box.height; y++) {
      if (coverage[y * out.width + x]! >= 0.9) [first, last] = [first < 0 ? y : first, y];
    }
    for (let y = first; first >= 0 && y <= last; y++, inside++) if (coverage[y * out.width + x]! < 0.9) holes++;
  }
  const translucent = holes / Math.max(1, inside);
  const L = (p: number) => toLab(out.data[p * 4]!, out.data[p * 4 + 1]!, out.data[p * 4 + 2]!)[0];
  const ls = opaque.map(L);
  const [lo, hi] = [Math.min(...ls), Math.max(...ls)];
  const teethPx = opaque.filter((_, i) => ls[i]! >= hi - 18 && hi - lo > 25);
  const cavityPx = opaque.filter((_, i) => ls[i]! <= lo + 12);
  const teethL = teethPx.map(L);
  const mean = teethL.reduce((s, v) => s + v, 0) / Math.max(1, teethL.length);
  const p99 = (f: Float32Array) => quantile(Array.from(f), 0.99);
  return {
    teeth:
      teethPx.length >= 4
        ? {
            lab: medianLab(out, teethPx),
            lightnessStd: Math.sqrt(teethL.reduce((s, v) => s + (v - mean) ** 2, 0) / teethL.length),
            pixels: teethPx.length,
            grain: grain(out, teethPx),
          }
        : null,
    cavity:
      cavityPx.length >= 4
        ? { p10: quantile(cavityPx.map(L), 0.1), lab: medianLab(out, cavityPx), pixels: cavityPx.length }
        : null,
    translucent,
    edges: { out: p99(sobel(out, box)), source: p99(sobel(source, box)) },
  };
}
