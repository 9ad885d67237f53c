/**
 * The mouth's picture on every frontal fixture face (render/rig/fixtures), held to measures a reviewer
 * can check without a trained judge (quality.ts; Lab is sRGB/D65): the portrait exactly in silence,
 * the lips' own colour and texture kept, teeth in the scene's colour and opaque, no second grey row of
 * teeth under a portrait's own, a cavity no darker than the portrait's own darks, no edges harder than
 * the portrait's, the corners sealed at small openings, a conversational opening, shapes per sound
 * ("oo" a small dark opening), and lip-sync at least as good as the previous renderer's
 * (render/synth/fixtures/mouth_synth_v1.onnx) by the rig's own measure.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFaceRig, type FaceRig } from '../rig/index.ts';
import { mouthShape } from '../talking-head/index.ts';
import { synthesize } from '../tts/index.ts';
import { VISEME_PARAMS, visemeTrack, type Viseme } from '../visemes/index.ts';
import { FIXTURE_FACES, PREVIOUS_SYNTH_MODEL, previousShape, speakingShape } from './compare.ts';
import { portraitFrame } from './examples/make-stills.ts';
import {
  createMouthSynth,
  isNeutral,
  prepareFaceForSynth,
  type MouthShape,
  type MouthSynth,
  type PreparedFace,
  type RgbaFrame,
} from './index.ts';
import {
  cheekTear,
  chroma,
  deltaE,
  drawnCoverage,
  fineGrain,
  grain,
  hue,
  hueDistance,
  keyPoint,
  lipContourEdges,
  lipPixels,
  lowerLipValley,
  luma,
  medianLab,
  mouthPicture,
  photoGrain,
  references,
  skinSeam,
  skinShear,
  toLab,
  warpPlanes,
  type Lab,
} from './quality.ts';

const SLOW = { timeout: 180_000 };

interface Face {
  name: string;
  frame: RgbaFrame & { data: Buffer };
  rig: FaceRig;
  face: PreparedFace;
  /** The portrait shows its own teeth. */
  ownTeeth: boolean;
  /** Its mouth is open, caught mid-speech: both rows of teeth, and the mouth's own dark between them. */
  openMidSpeech: boolean;
}

let synth: MouthSynth;
let previous: MouthSynth;
const faces: Face[] = [];

async function rigOf(frame: RgbaFrame): Promise<FaceRig> {
  return detectFaceRig(
    await sharp(Buffer.from(frame.data), { raw: { width: frame.width, height: frame.height, channels: 4 } })
      .png()
      .toBuffer(),
  );
}

beforeAll(async () => {
  synth = await createMouthSynth();
  previous = await createMouthSynth({ modelPath: PREVIOUS_SYNTH_MODEL });
  for (const name of FIXTURE_FACES) {
    const frame = await portraitFrame(name);
    const rig = await rigOf(frame);
    faces.push({
      name,
      frame,
      rig,
      face: prepareFaceForSynth(rig),
      ownTeeth: rig.mouthOpenness > 0.12,
      openMidSpeech: rig.mouthOpenness > 0.3,
    });
  }
}, 120_000);

afterAll(async () => {
  await synth?.release();
  await previous?.release();
});

async function render(f: Face, shape: MouthShape, engine = synth): Promise<RgbaFrame & { data: Buffer }> {
  return { ...f.frame, data: Buffer.from(await engine.renderFrame(f.frame, f.face, shape)) };
}

/** A face's mouth at a sound: the frame, what the graph drew of it, and the picture's measures. */
async function pictureAt(f: Face, v: Viseme) {
  const shape = speakingShape(v);
  const out = await render(f, shape);
  const coverage = await drawnCoverage(synth, f.frame, f.face, shape);
  return { out, coverage, picture: mouthPicture(out, f.frame, f.face, coverage) };
}

function pearson(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  const mx = xs.reduce((s, v) => s + v, 0) / n;
  const my = ys.reduce((s, v) => s + v, 0) / n;
  let [sxy, sxx, syy] = [0, 0, 0];
  for (let i = 0; i < n; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my);
    sxx += (xs[i]! - mx) ** 2;
    syy += (ys[i]! - my) ** 2;
  }
  return sxy / Math.sqrt(sxx * syy);
}

const OPEN_SOUNDS: Viseme[] = ['aa', 'E', 'oh'];

/**
 * A measure on every face without teeth of its own, each value checked by `each`; their mean, and every
 * face's value listed for the message.
 */
async function onPlainFaces(
  measure: (f: Face) => Promise<number>,
  each: (value: number, f: Face) => void,
): Promise<{ mean: number; listed: string }> {
  const plain = faces.filter((x) => !x.ownTeeth);
  const values: string[] = [];
  let sum = 0;
  for (const f of plain) {
    const value = await measure(f);
    values.push(`${f.name} ${value.toFixed(2)}`);
    sum += value;
    each(value, f);
  }
  return { mean: sum / plain.length, listed: values.join(', ') };
}

/** The colour faces without teeth of their own (their darks' chroma 10 or more), with those darks. */
function colourFaces(): { f: Face; dark: Lab }[] {
  const found = faces
    .filter((x) => !x.ownTeeth)
    .map((f) => ({ f, dark: references(f.frame, f.face).dark }))
    .filter(({ dark }) => chroma(dark) >= 10);
  expect(found.length).toBeGreaterThanOrEqual(2);
  return found;
}

/** A colour drawn in the mouth as deep as the portrait's own darks: at least `share` of their chroma, warm. */
function expectAsDeepAsOwnDarks(lab: Lab, dark: Lab, share: number, what: string): void {
  const message = `${what} ${lab.map((x) => x.toFixed(1)).join(' ')}, own darks ${dark.map((x) => x.toFixed(1)).join(' ')}`;
  expect(chroma(lab), message).toBeGreaterThanOrEqual(share * chroma(dark));
  expect(hue(lab), message).toBeLessThan(60);
}

function lumaAt(frame: RgbaFrame, x: number, y: number): number {
  return luma(frame.data, (y * frame.width + x) * 4);
}

/**
 * The runs of teeth down column x from row y0 to y1: light (L* 45 or more, by default) and far less saturated than
 * the skin (at most half its chroma, the source's; lips, skin and the mouth's inside are all red).
 */
function teethRuns(
  frame: RgbaFrame,
  skinChroma: number,
  x: number,
  y0: number,
  y1: number,
  { minL = 45, chromaShare = 0.5 } = {},
) {
  const runs: { from: number; to: number }[] = [];
  for (let y = y0; y < y1; y++) {
    const i = (y * frame.width + x) * 4;
    const lab = toLab(frame.data[i]!, frame.data[i + 1]!, frame.data[i + 2]!);
    if (lab[0] < minL || chroma(lab) > chromaShare * skinChroma) continue;
    const last = runs.at(-1);
    if (last && last.to === y - 1) last.to = y;
    else runs.push({ from: y, to: y });
  }
  return runs;
}

/**
 * Down the middle of a face's mouth: its width W, the inner lips' midpoints, the rows from 0.1 W above the
 * upper one to `below` W under the lower one, and the skin's chroma (teethRuns' reference).
 */
function mouthSpan(f: Face, below: number) {
  const W = f.face.mouthWidth;
  const [up, low] = [keyPoint(f.face, 5), keyPoint(f.face, 15)];
  const [y0, y1] = [Math.round(up.y - 0.1 * W), Math.round(low.y + below * W)];
  return { W, up, y0, y1, skin: chroma(references(f.frame, f.face).skin) };
}

/** The rows of column x that the drawn layer covers at least `min`, top down. */
function coveredRows(coverage: Float32Array, frame: RgbaFrame, x: number, min = 0.5): number[] {
  const rows: number[] = [];
  for (let y = 0; y < frame.height; y++) if (coverage[y * frame.width + x]! >= min) rows.push(y);
  return rows;
}

/** The frame pixels the drawn layer covers (nearly) opaquely. */
function opaquePixels(coverage: Float32Array): number[] {
  const drawn: number[] = [];
  for (let p = 0; p < coverage.length; p++) if (coverage[p]! >= 0.9) drawn.push(p);
  return drawn;
}

describe('the mouth on every fixture face', () => {
  it(
    'is the portrait itself in silence: a neutral shape, and the end of an utterance once it has settled',
    SLOW,
    async () => {
      const speech = await synthesize({ text: 'Hello there.' });
      const track = visemeTrack(speech.phones, 25, { durationSeconds: speech.durationSeconds + 3 });
      const settled = track.frames.at(-1)!;
      expect(
        isNeutral(mouthShape(settled)),
        `three seconds after the speech: ${JSON.stringify(mouthShape(settled))}`,
      ).toBe(true);
      expect(settled.relax, 'the speaking envelope is back to exactly 0').toBe(0);
      for (const f of faces) {
        for (const shape of [mouthShape(settled), speakingShape('sil')]) {
          expect(Buffer.compare((await render(f, shape)).data, f.frame.data), f.name).toBe(0);
        }
      }
    },
  );

  it(
    'draws nothing between lips that are together (m/b/p, a pause mid-utterance), whatever gap the landmarks leave',
    SLOW,
    async () => {
      // (in a beard or moustache the landmarks can leave a gap between the lips the photograph does not
      // show: drawing into it put a dark seam across the moustache)
      for (const f of faces) {
        for (const shape of [speakingShape('PP'), { open: 0, wide: 0, round: 0, press: 0, tuck: 0, relax: 1 }]) {
          const coverage = await drawnCoverage(synth, f.frame, f.face, shape);
          let drawn = 0;
          for (const c of coverage) if (c > 0.02) drawn++;
          if (f.ownTeeth && (shape.press ?? 0) > 0) {
            // (lips closed over the portrait's teeth meet in a drawn crease: a line a few pixels high)
            expect(drawn, `${f.name} ${JSON.stringify(shape)}: pixels drawn`).toBeLessThanOrEqual(
              8 * f.face.mouthWidth,
            );
          } else expect(drawn, `${f.name} ${JSON.stringify(shape)}: pixels drawn`).toBe(0);
        }
      }
    },
  );

  it("keeps the lips' own colour and texture as the mouth opens: each lip moves as one piece", SLOW, async () => {
    // Each lip of the source (the rig's lip region, its middle 30%, the middle half of its rows) against
    // the output's pixels at the vertical shift that matches each column best (the lip moved, not
    // redrawn): the match must be close, and the colour and the grain the lip's own.
    const lumaOf = (d: ArrayLike<number>, p: number) => luma(d, p * 4);
    for (const f of faces.filter((x) => !x.ownTeeth)) {
      const W = f.face.mouthWidth;
      const [up, low] = [keyPoint(f.face, 5), keyPoint(f.face, 15)];
      const crease = (up.y + low.y) / 2;
      // the portrait moved down by half a pixel (each row the mean of itself and the one above)
      const halfDown = { ...f.frame, data: Buffer.from(f.frame.data) };
      const row = 4 * f.frame.width;
      for (let i = row; i < halfDown.data.length; i++)
        halfDown.data[i] = (f.frame.data[i]! + f.frame.data[i - row]!) / 2;
      const middle = (p: number) => Math.abs((p % f.frame.width) - (up.x + low.x) / 2) < 0.15 * W;
      // of each lip, per column, the middle half of its rows (its edges are where the opening shades it)
      const lips = lipPixels(f.frame, f.rig.lips).filter(middle);
      const core = (part: number[]) => {
        const byColumn = new Map<number, number[]>();
        for (const p of part) byColumn.set(p % f.frame.width, [...(byColumn.get(p % f.frame.width) ?? []), p]);
        return [...byColumn.values()].flatMap((c) =>
          c.sort((a, b) => a - b).slice(Math.floor(c.length / 4), Math.ceil((3 * c.length) / 4)),
        );
      };
      const sets = {
        upper: core(lips.filter((p) => p / f.frame.width < crease)),
        lower: core(lips.filter((p) => p / f.frame.width > crease)),
      };
      for (const v of OPEN_SOUNDS) {
        const out = await render(f, speakingShape(v));
        for (const [name, from] of Object.entries(sets)) {
          // the shift that matches the whole lip best, then per column within 2 px of it (the opening's
          // profile drops the lip a little less towards the corners)
          const error = (pixels: number[], shift: number) =>
            pixels.reduce(
              (sum, p) => sum + Math.abs(lumaOf(out.data, p + shift * f.frame.width) - lumaOf(f.frame.data, p)),
              0,
            ) / pixels.length;
          const [lo, hi] = name === 'upper' ? [Math.round(-0.12 * W), Math.round(0.05 * W)] : [0, Math.round(0.4 * W)];
          let global = lo;
          for (let shift = lo; shift <= hi; shift++) if (error(from, shift) < error(from, global)) global = shift;
          const byColumn = new Map<number, number[]>();
          for (const p of from) byColumn.set(p % f.frame.width, [...(byColumn.get(p % f.frame.width) ?? []), p]);
          const to: number[] = [];
          const shifts: number[] = [];
          let errSum = 0;
          for (const column of byColumn.values()) {
            let best = global;
            for (let shift = global - 2; shift <= global + 2; shift++)
              if (error(column, shift) < error(column, best)) best = shift;
            to.push(...column.map((p) => p + best * f.frame.width));
            errSum += error(column, best) * column.length;
            shifts.push(best);
          }
          const bestErr = errSum / from.length;
          const before = { lab: medianLab(f.frame, from), grain: grain(f.frame, from), moved: grain(halfDown, from) };
          const after = { lab: medianLab(out, to), grain: grain(out, to) };
          const what = `${f.name} ${v} ${name} lip (${from.length} px, moved ${Math.min(...shifts)}..${Math.max(...shifts)} px, mean difference ${bestErr.toFixed(1)}): ${JSON.stringify({ before, after })}`;
          expect(from.length, what).toBeGreaterThan(15);
          expect(bestErr, what).toBeLessThan(12);
          expect(deltaE(before.lab, after.lab), what).toBeLessThan(6);
          // (grain within 30-40% of the lip's own, or within 1.5 levels on a smooth lip; at least, that of
          // the lip moved by half a pixel: a lip moved by a fraction of a pixel is interpolated, and
          // how much of its finest grain survives depends on that fraction)
          expect(after.grain, what).toBeGreaterThan(Math.min(0.7 * before.moved, before.moved - 1.5));
          expect(after.grain, what).toBeLessThan(Math.max(1.4 * before.grain, before.grain + 1.5));
        }
      }
    }
  });

  it("gives the drawn mouth the photograph's own grain, weaker in the dark as a photograph's is", SLOW, async () => {
    // Measured where the grain is above the 8-bit steps (five of the fixture photographs): in the darker half of the
    // drawn pixels whose 3x3 neighbourhood is all drawn (the cavity), against the photograph's grain at that light
    // (0.9 to 1.4 of it; the previous graph's fixed 1% grain gave grace_hopper 0.72).
    let measured = 0;
    for (const f of faces.filter((x) => !x.ownTeeth)) {
      const shape = speakingShape('aa');
      const out = await render(f, shape);
      const coverage = await drawnCoverage(synth, f.frame, f.face, shape);
      const w = f.frame.width;
      const interior = opaquePixels(coverage).filter((p) =>
        [-w - 1, -w, -w + 1, -1, 1, w - 1, w, w + 1].every((d) => coverage[p + d]! >= 0.9),
      );
      const lumas = interior.map((p) => luma(out.data, p * 4)).sort((a, b) => a - b);
      const cavity = interior.filter((p) => luma(out.data, p * 4) <= lumas[Math.floor(lumas.length / 2)]!);
      const light = cavity.reduce((s, p) => s + luma(out.data, p * 4), 0) / cavity.length;
      const expected = photoGrain(f.frame, f.face) * Math.sqrt(light / 255);
      if (expected < 0.5) continue;
      const ratio = fineGrain(out, cavity) / expected;
      const what = `${f.name}: the cavity's grain against the photograph's at its light, ${ratio.toFixed(2)}`;
      expect(ratio, what).toBeGreaterThanOrEqual(0.8);
      expect(ratio, what).toBeLessThanOrEqual(1.6);
      measured++;
    }
    expect(measured, 'faces with a grain to match').toBeGreaterThanOrEqual(3);
  });

  it("draws teeth in the skin's hue and light, opaque: never grey, blue or green", SLOW, async () => {
    for (const f of faces.filter((x) => !x.ownTeeth)) {
      const { skin } = references(f.frame, f.face);
      for (const v of ['aa', 'E', 'ih'] as const) {
        const shape = speakingShape(v);
        const out = await render(f, shape);
        const pic = mouthPicture(out, f.frame, f.face, await drawnCoverage(synth, f.frame, f.face, shape));
        const t = pic.teeth;
        const what = `${f.name} ${v}: teeth ${JSON.stringify(t)} skin ${JSON.stringify(skin)}`;
        expect(t, what).not.toBeNull();
        if (chroma(skin) < 3) {
          expect(chroma(t!.lab), `${what}: a monochrome photograph, monochrome teeth`).toBeLessThan(2);
        } else {
          expect(t!.lab[1], what).toBeGreaterThanOrEqual(0); // not green
          expect(t!.lab[2], what).toBeGreaterThanOrEqual(0); // not blue
          expect(hueDistance(hue(t!.lab), hue(skin)), what).toBeLessThanOrEqual(20);
          expect(chroma(t!.lab) / chroma(skin), what).toBeGreaterThanOrEqual(0.35);
          expect(chroma(t!.lab) / chroma(skin), what).toBeLessThanOrEqual(1);
        }
        expect(t!.lab[0], what).toBeGreaterThanOrEqual(skin[0] - 12);
        expect(t!.lightnessStd, what).toBeGreaterThanOrEqual(2);
        expect(t!.lightnessStd, what).toBeLessThanOrEqual(10);
        expect(pic.translucent, what).toBeLessThan(0.05);
      }
    }
  });

  it(
    "keeps a portrait's own upper teeth with the skull: as the mouth opens they stay where and as they were",
    SLOW,
    async () => {
      for (const f of faces.filter((x) => x.ownTeeth)) {
        // the upper teeth the source shows: the bright pixels of two columns beside the middle (the middle
        // one can run down the gap between the incisors) from a little above the inner upper lip (whose
        // landmarks sit low on a broad smile) down the upper half of the opening (a mouth open mid-speech
        // shows its lower teeth too, often the brighter ones, and they go down with the jaw)
        const W = f.face.mouthWidth;
        const [up, low] = [keyPoint(f.face, 5), keyPoint(f.face, 15)];
        const teeth: number[] = [];
        for (const dx of [-0.1 * W, 0.1 * W]) {
          const x = Math.round(up.x + dx);
          const [y0, y1] = [Math.round(up.y - 0.1 * W), Math.round((up.y + low.y) / 2)];
          const ys = Array.from({ length: Math.max(0, y1 - y0) }, (_, k) => y0 + k);
          const top = Math.max(...ys.map((y) => lumaAt(f.frame, x, y)));
          for (const y of ys) if (lumaAt(f.frame, x, y) >= 0.8 * top) teeth.push(y * f.frame.width + x);
        }
        expect(teeth.length, `${f.name}: teeth pixels found`).toBeGreaterThanOrEqual(6);
        for (const v of OPEN_SOUNDS) {
          const out = await render(f, speakingShape(v));
          const moved = teeth.filter(
            (p) =>
              Math.abs(
                lumaAt(out, p % f.frame.width, Math.floor(p / f.frame.width)) -
                  lumaAt(f.frame, p % f.frame.width, Math.floor(p / f.frame.width)),
              ) > 12,
          );
          expect(moved.length, `${f.name} ${v}: of ${teeth.length} teeth pixels, changed`).toBeLessThanOrEqual(
            Math.floor(teeth.length * 0.2),
          );
        }
      }
    },
  );

  it("draws no second, grey row of teeth under a portrait's own (only the lower teeth's edges)", SLOW, async () => {
    // Its own lower part of the opening comes down with the lower lip; what is drawn above it is cavity,
    // tongue and the lower teeth's edges. The graph before this one drew whole lower teeth there, shaded
    // grey: 9-32% of the drawn interior light and colourless on these faces, a reviewer's "grey slab".
    // (a portrait caught open mid-speech draws nothing there: 'opens a portrait caught mid-speech ...')
    const colourFaces = faces.filter(
      (x) => x.ownTeeth && !x.openMidSpeech && chroma(references(x.frame, x.face).skin) >= 10,
    );
    expect(colourFaces.length).toBeGreaterThanOrEqual(2);
    for (const f of colourFaces) {
      for (const v of OPEN_SOUNDS) {
        const shape = speakingShape(v);
        const out = await render(f, shape);
        const coverage = await drawnCoverage(synth, f.frame, f.face, shape);
        const drawn = opaquePixels(coverage);
        const labs = drawn.map((p) => medianLab(out, [p]));
        const lightGrey = labs.filter((lab) => lab[0] > 45 && chroma(lab) < 12).length / labs.length;
        expect(drawn.length, `${f.name} ${v}: drawn pixels`).toBeGreaterThan(50);
        expect(lightGrey, `${f.name} ${v}: light, colourless share of the drawn interior`).toBeLessThan(0.08);
      }
    }
  });

  it("opens a portrait caught mid-speech into its own mouth's inside, not a flat fill", SLOW, async () => {
    // (the new space between its upper teeth and its own inside, which comes down with the lower lip, takes
    // the portrait's own dark just under its teeth, stretched; drawn, it was one flat dark-brown band, a
    // reviewer's "flat shape cut into the photo"): under the upper teeth, down the middle, the dark pixels'
    // mean luma step to their neighbours, 11.4 levels at rest, 2.5 drawn, 7.8 now
    const open = faces.filter((x) => x.openMidSpeech);
    expect(open.length).toBeGreaterThanOrEqual(1);
    for (const f of open) {
      const { W, up, y0, y1, skin } = mouthSpan(f, 0.4);
      const inside = (frame: RgbaFrame) => {
        const values: number[] = [];
        for (const dx of [-0.1, 0, 0.1]) {
          const x = Math.round(up.x + dx * W);
          // (the 0.1 W under its upper teeth)
          const runs = teethRuns(frame, skin, x, y0, y1);
          expect(runs.length, `${f.name}: upper teeth in column ${x}`).toBeGreaterThanOrEqual(1);
          const top = runs[0]!.to + 2;
          const l = (xx: number, yy: number) => luma(frame.data, (yy * frame.width + xx) * 4);
          for (let y = top; y <= top + 0.1 * W; y++)
            for (let xx = x - 3; xx <= x + 3; xx++)
              if (l(xx, y) < 70) values.push(Math.abs(l(xx + 1, y) - l(xx, y)) + Math.abs(l(xx, y + 1) - l(xx, y)));
        }
        return values.reduce((p, q) => p + q, 0) / values.length;
      };
      const [rest, ah] = [inside(f.frame), inside(await render(f, speakingShape('aa')))];
      expect(ah, `${f.name} ah: luma steps inside, ${rest.toFixed(1)} at rest`).toBeGreaterThanOrEqual(0.6 * rest);
    }
  });

  it("opens under a portrait's own teeth in a curve, not a box", SLOW, async () => {
    // The new space between its upper teeth and its lower part, which comes down with the lip: column
    // by column, its height at 0.7 of the way from the middle to its ends against the middle's. The
    // graph before this one sagged bluntly (0.63-0.72 on these faces): under the teeth, a dark box with
    // straight sides, the portrait's own tongue and lower teeth sheared down inside it.
    const ownFaces = faces.filter((x) => x.ownTeeth && !x.openMidSpeech); // (one open mid-speech draws none)
    expect(ownFaces.length).toBeGreaterThanOrEqual(2);
    for (const f of ownFaces) {
      for (const v of OPEN_SOUNDS) {
        const coverage = await drawnCoverage(synth, f.frame, f.face, speakingShape(v));
        const columns = Array.from({ length: f.frame.width }, (_, x) => coveredRows(coverage, f.frame, x).length);
        const drawn = columns.flatMap((n, x) => (n > 0 ? [x] : []));
        const [mid, half] = [(drawn[0]! + drawn.at(-1)!) / 2, (drawn.at(-1)! - drawn[0]!) / 2];
        const at = (t: number) => (columns[Math.round(mid - t * half)]! + columns[Math.round(mid + t * half)]!) / 2;
        expect(at(0), `${f.name} ${v}: height at the middle`).toBeGreaterThanOrEqual(6);
        expect(at(0.7) / at(0), `${f.name} ${v}: heights ${at(0)} and ${at(0.7)}`).toBeLessThanOrEqual(0.6);
      }
    }
  });

  it("opens under a portrait's own teeth onto a shaded mouth with its tongue, not a black slab", SLOW, async () => {
    // Down the middle 0.3 W of the opening (what the graph draws opaquely): the 40th percentile of L*, and the
    // upper half of its rows against the lower (the back of the mouth behind the teeth, the tongue in front).
    // A portrait showing its teeth draws its cavity from the dark between them, black on the portrait whose
    // own darks are L* 3: the graph before this one filled "ah" and "o" there with one flat slab (L* 7.8 and
    // 10.0), its tongue a thin strip at the bottom (a blind reviewer: "a hole cut into the photo"); 20-29 now.
    // The faces drawn whole open at 12-27.
    const ownFaces = faces.filter((x) => x.ownTeeth && !x.openMidSpeech);
    expect(ownFaces.length).toBeGreaterThanOrEqual(2);
    for (const f of ownFaces) {
      const W = f.face.mouthWidth;
      const x0 = Math.round(keyPoint(f.face, 5).x);
      for (const v of OPEN_SOUNDS) {
        const { out, coverage } = await pictureAt(f, v);
        const all: number[] = [];
        const halves = [0, 0, 0, 0]; // sum and count of L*, upper half then lower
        for (let x = x0 - Math.round(0.15 * W); x <= x0 + Math.round(0.15 * W); x++) {
          const rows = coveredRows(coverage, out, x, 0.9);
          const mid = (rows[0]! + rows.at(-1)!) / 2;
          for (const y of rows) {
            const i = (y * out.width + x) * 4;
            const l = toLab(out.data[i]!, out.data[i + 1]!, out.data[i + 2]!)[0];
            all.push(l);
            halves[y <= mid ? 0 : 2]! += l;
            halves[y <= mid ? 1 : 3]! += 1;
          }
        }
        all.sort((a, b) => a - b);
        const [p40, upper, lower] = [
          all[Math.floor(0.4 * (all.length - 1))]!,
          halves[0]! / halves[1]!,
          halves[2]! / halves[3]!,
        ];
        const what = `${f.name} ${v}: L* p40 ${p40.toFixed(1)}, upper half ${upper.toFixed(1)}, lower ${lower.toFixed(1)}`;
        expect(all.length, what).toBeGreaterThanOrEqual(20);
        expect(p40, what).toBeGreaterThanOrEqual(15);
        expect(upper, what).toBeLessThan(lower);
      }
    }
  });

  it(
    "shades the opening from the portrait's own darks: no darker than they are, in the lips' warm hue",
    SLOW,
    async () => {
      // (a portrait caught open mid-speech shows its own inside instead)
      for (const f of faces.filter((x) => !x.openMidSpeech)) {
        const { dark } = references(f.frame, f.face);
        for (const v of OPEN_SOUNDS) {
          const c = (await pictureAt(f, v)).picture.cavity;
          const what = `${f.name} ${v}: cavity ${JSON.stringify(c)} own darks ${JSON.stringify(dark)}`;
          expect(c, what).not.toBeNull();
          expect(c!.p10, what).toBeGreaterThanOrEqual(Math.max(5, Math.min(dark[0], 25) - 5));
          if (chroma(dark) >= 3) {
            expect(hue(c!.lab), what).toBeLessThan(80); // red to orange, never grey-blue
            expect(chroma(c!.lab), what).toBeGreaterThanOrEqual(Math.min(8, 0.5 * chroma(dark)));
          }
        }
      }
    },
  );

  it('gives a small opening the deep red of the lips in shade, not a grey-blue blob', SLOW, async () => {
    // "u" and "ch" show mostly the lips' inner faces and the dark behind them. Their median chroma against
    // the portrait's own darks (its crease or nostrils): 0.62 on both colour faces with the graph before
    // this one, whose mix of the lips' light colour with the cavity's dark read grey-blue between red lips.
    for (const { f, dark } of colourFaces()) {
      for (const v of ['ou', 'CH'] as const) {
        const { out, coverage } = await pictureAt(f, v);
        expectAsDeepAsOwnDarks(medianLab(out, opaquePixels(coverage)), dark, 0.75, `${f.name} ${v}: opening`);
      }
    }
  });

  it("gives an open mouth's cavity the warm depth of the portrait's own darks, not a grey-mauve", SLOW, async () => {
    // The cavity's median chroma (the opening's darkest pixels, `mouthPicture`) at "ah", "eh" and "o"
    // against the portrait's own darks: 0.55-0.59 on the colour faces with the graph before this one, which
    // kept the lips' hue at the cavity's light but not the depth of colour tissue takes in shade; a blind
    // reviewer read it as grey-mauve beside warm skin.
    for (const { f, dark } of colourFaces()) {
      for (const v of OPEN_SOUNDS) {
        const { picture } = await pictureAt(f, v);
        expectAsDeepAsOwnDarks(picture.cavity!.lab, dark, 0.7, `${f.name} ${v}: cavity`);
      }
    }
  });

  it(
    "draws the opening's lip edges no harder than the previous renderer, and within twice the portrait's own lip lines",
    SLOW,
    async () => {
      // The Sobel magnitude along the opening's lips against the portrait's own lip lines (quality.ts):
      // on average over the faces with a closed mouth at most the previous renderer's, and on no face
      // beyond twice the portrait's own (a soft, enlarged photograph has soft lip lines).
      for (const v of OPEN_SOUNDS) {
        const ratios = { current: [] as number[], previous: [] as number[] };
        for (const f of faces.filter((x) => !x.ownTeeth)) {
          for (const [name, engine, shape] of [
            ['current', synth, speakingShape(v)],
            ['previous', previous, previousShape(v)],
          ] as const) {
            const edges = lipContourEdges(
              await render(f, shape, engine),
              f.frame,
              f.face,
              await drawnCoverage(engine, f.frame, f.face, shape),
              f.rig.lips,
            );
            ratios[name].push(edges.out / edges.source);
          }
        }
        const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
        const what = `${v}: ${JSON.stringify(ratios)}`;
        expect(mean(ratios.current), what).toBeLessThanOrEqual(mean(ratios.previous));
        expect(Math.max(...ratios.current), what).toBeLessThan(2);
      }
    },
  );

  it('ends the opening in the lower lip itself: no dark line drawn or carried along its edge', SLOW, async () => {
    // (a closed mouth's crease, carried down with the lower lip, ran under the opening as a dark outline:
    // 13 to 39 levels below both of its sides at "a" and "e"; a painted look on the monochrome faces;
    // the lip sampled from inside a soft photograph's wide crease ended the opening in a dark rim under its
    // soft edge: 14 to 23 levels, seen from the opening's opaque inside; and a portrait showing its teeth
    // brought the dark under its upper teeth down with its lower part: a dark line along the top of the
    // lower lip, 16 to 24 levels on the smiling fixture with the largest mouth). A mouth caught open
    // mid-speech ends its opening in its own interior instead (the next test).
    for (const f of faces.filter((x) => !x.openMidSpeech)) {
      for (const v of OPEN_SOUNDS) {
        const shape = speakingShape(v);
        const [out, coverage] = [await render(f, shape), await drawnCoverage(synth, f.frame, f.face, shape)];
        const what = `${f.name} ${v}: levels of the darkest line under the opening`;
        expect(lowerLipValley(out, f.face, coverage), what).toBeLessThan(8);
        if (!f.ownTeeth)
          expect(lowerLipValley(out, f.face, coverage, 0.9), `${what}, from its opaque inside`).toBeLessThan(15);
      }
    }
  });

  it(
    'opens a mouth caught mid-speech under its upper teeth: its lower teeth come down with the jaw',
    SLOW,
    async () => {
      // (its occlusal line was taken at the largest fall of light down its opening, there the lower teeth's
      // edge on the lower lip: the lower teeth stayed, a one-pixel sliver of their edge went down with the
      // lip, and a dark crescent opened between, 22 levels darker than the source under its lower teeth)
      const open = faces.filter((x) => x.openMidSpeech);
      expect(open.length, 'fixtures caught mid-speech').toBeGreaterThanOrEqual(1);
      for (const f of open) {
        const { W, up, y0, y1, skin } = mouthSpan(f, 0.4);
        const span = Math.round(0.08 * W);
        // the darkest under the lower teeth, within 0.08 mouth widths: the lip's own shadow, not a crescent
        const under = (frame: RgbaFrame, x: number, teeth: { to: number }) =>
          Math.min(...Array.from({ length: span }, (_, k) => lumaAt(frame, x, teeth.to + 1 + k)));
        for (const [v, drop] of [
          ['aa', 0.05],
          ['E', 0.02],
          ['oh', 0.02],
        ] as const) {
          const out = await render(f, speakingShape(v));
          for (const dx of [-0.1 * W, 0.1 * W]) {
            const x = Math.round(up.x + dx);
            const source = teethRuns(f.frame, skin, x, y0, y1);
            expect(source.length, `${f.name}: teeth in the source's column`).toBeGreaterThanOrEqual(1);
            const [lower, moved] = [source.at(-1)!, teethRuns(out, skin, x, y0, y1).at(-1)!];
            const what = `${f.name} ${v}, column ${x}`;
            expect(moved.from - lower.from, `${what}: px the lower teeth came down`).toBeGreaterThanOrEqual(drop * W);
            expect(
              Math.abs(moved.to - moved.from - (lower.to - lower.from)),
              `${what}: px of teeth lost`,
            ).toBeLessThanOrEqual(2);
            expect(
              under(f.frame, x, lower) - under(out, x, moved),
              `${what}: levels darker under the lower teeth`,
            ).toBeLessThan(12);
          }
        }
      }
    },
  );

  it(
    "closes the lips over a portrait's own teeth for m, b, p and oo, and brings the lower lip up to them for f, v",
    SLOW,
    async () => {
      // (the lips each move as one piece over the teeth, which stay, and meet in a crease; the graph
      // before could not press a mouth that shows its teeth: it kept every row of them; and a smile kept its
      // whole row of teeth for "oo", a grin where the lips round; a portrait caught open mid-speech keeps
      // its opening for it)
      const showing = faces.filter((x) => x.ownTeeth);
      expect(showing.length, 'fixtures showing their teeth').toBeGreaterThanOrEqual(2);
      for (const f of showing) {
        const { W, up, y0, y1, skin } = mouthSpan(f, 0.1);
        // (light and far less saturated than the skin; a bright, warm photograph's teeth are warmer)
        const teethRows = (frame: RgbaFrame, x: number) =>
          teethRuns(frame, skin, x, y0, y1, { minL: 70, chromaShare: 0.7 }).reduce((n, r) => n + r.to - r.from + 1, 0);
        const pressed = await render(f, speakingShape('PP'));
        const rounded = f.openMidSpeech ? null : await render(f, speakingShape('ou'));
        let columns = 0;
        for (const dx of [-0.1, 0, 0.1]) {
          const x = Math.round(up.x + dx * W);
          if (teethRows(f.frame, x) < 3) continue; // (no teeth in the portrait's column)
          columns++;
          expect(teethRows(pressed, x), `${f.name} m/b/p, column ${x}: rows of teeth left`).toBeLessThanOrEqual(1);
          if (rounded)
            expect(teethRows(rounded, x), `${f.name} oo, column ${x}: rows of teeth left`).toBeLessThanOrEqual(1);
        }
        expect(columns, `${f.name}: columns with teeth in the portrait`).toBeGreaterThanOrEqual(2);
        // (the rig reads the mouth shut: a closed portrait's openness is under 0.05)
        const [rest, shut] = [f.rig.mouthOpenness, (await rigOf(pressed)).mouthOpenness];
        expect(shut, `${f.name}: the rig's openness, the portrait ${rest.toFixed(3)}, pressed`).toBeLessThan(
          Math.min(0.08, rest * 0.25),
        );
        // the upper lip stays above the closure (m, b, p, and oo), at least as thick as the landmarks give it:
        // down the middle columns, the rows that take their colour from between the landmarks' outer and inner
        // upper lip (the landmarks can sit inside a smile's lip, its red running 2 to 5 pixels below their
        // line: the closure took its lip from above that line and stretched the skin above over it, 0 such
        // rows on the two smiles; 3 and 5 now, of 1.9 and 4.5)
        for (const v of f.openMidSpeech ? (['PP'] as const) : (['PP', 'ou'] as const)) {
          const planes = (await warpPlanes(synth, f.frame, f.face, speakingShape(v)))!;
          const [outerUp, innerUp] = [planes.point(25), planes.point(5)];
          const mid = Math.round(innerUp.x - planes.warpAt - 0.5);
          let lipRows = 0;
          for (const c of [mid - 2, mid, mid + 2])
            for (let r = 0; r < planes.w; r++) {
              const from = r + planes.warpAt + 0.5 + planes.dv[r * planes.w + c]!;
              if (from >= outerUp.y && from <= innerUp.y) lipRows++;
            }
          expect(
            lipRows / 3,
            `${f.name} ${v}: rows of upper lip above the closure (the landmarks give ${(innerUp.y - outerUp.y).toFixed(1)})`,
          ).toBeGreaterThanOrEqual(0.9 * (innerUp.y - outerUp.y));
        }
        if (!f.openMidSpeech) continue;
        // f, v: the upper teeth stay, the lower lip comes up to them over the lower teeth and the inside
        const fv = await render(f, speakingShape('FF'));
        const below = mouthSpan(f, 0.4).y1; // (as far down as the mid-speech test looks)
        for (const dx of [-0.1, 0.1]) {
          const x = Math.round(up.x + dx * W);
          const [source, out] = [teethRuns(f.frame, skin, x, y0, below), teethRuns(fv, skin, x, y0, below)];
          const what = `${f.name} f/v, column ${x}`;
          expect(source.length, `${what}: teeth in the portrait's column`).toBeGreaterThanOrEqual(1);
          const lower = source.at(-1)!; // (the lower teeth, as the mid-speech test takes them)
          expect(
            out.filter((r) => r.to >= lower.from - 2),
            `${what}: teeth left where the lower teeth were (rows ${lower.from}-${lower.to})`,
          ).toEqual([]);
          if (source.length >= 2) expect(out[0], `${what}: the upper teeth, where they were`).toEqual(source[0]);
        }
      }
    },
  );

  it('moves the cheeks beside a smile as a whole: no step in the nasolabial folds', SLOW, async () => {
    // (a portrait's own upper teeth stay with the skull while a smile eases; when the whole rows of the
    // teeth stayed, the cheeks beside them did too, and the folds broke into steps of up to 4 pixels)
    for (const f of faces) {
      for (const v of ['aa', 'E', 'oh', 'ou', 'FF', 'PP'] as const) {
        const tear = cheekTear(await warpPlanes(synth, f.frame, f.face, speakingShape(v)));
        expect(tear, `${f.name} ${v}: px of horizontal motion per row`).toBeLessThan(0.8);
      }
    }
  });

  it('opens from the middle, the corners sealed, and no wider than conversation needs', SLOW, async () => {
    for (const f of faces.filter((x) => !x.ownTeeth)) {
      const W = f.face.mouthWidth;
      for (const v of ['DD', 'E', 'aa'] as const) {
        const shape = speakingShape(v);
        const cov = await drawnCoverage(synth, f.frame, f.face, shape);
        // the corners where the shape put them (spread moves them out), found by the rig
        const moved = await rigOf(await render(f, shape));
        const [a, b] = [moved.landmarks[61]!, moved.landmarks[291]!];
        let [x0, x1, tallest] = [Infinity, -Infinity, 0];
        for (let x = Math.floor(Math.min(a.x, b.x)); x <= Math.ceil(Math.max(a.x, b.x)); x++) {
          let column = 0;
          for (let y = Math.round(a.y - 0.3 * W); y < Math.round(a.y + 0.5 * W); y++)
            if (cov[y * f.frame.width + x]! >= 0.9) column++;
          if (column >= 1) [x0, x1] = [Math.min(x0, x), Math.max(x1, x)];
          tallest = Math.max(tallest, column);
        }
        const what = `${f.name} ${v}: opening x ${x0}..${x1}, corners ${a.x.toFixed(1)} ${b.x.toFixed(1)}, tallest ${tallest} px of W ${W.toFixed(1)}`;
        if (VISEME_PARAMS[v].open < 0.6) {
          expect(x0 - Math.min(a.x, b.x), what).toBeGreaterThanOrEqual(0.07 * W);
          expect(Math.max(a.x, b.x) - x1, what).toBeGreaterThanOrEqual(0.07 * W);
        }
        expect(tallest, what).toBeLessThanOrEqual((0.3 + f.rig.mouthOpenness) * W); // beyond the portrait's own opening
      }
    }
  });

  it('draws nothing past the corners: no line runs on from them into the cheeks or a beard', SLOW, async () => {
    // (where the landmarks leave a gap between lips that meet beyond the opening's ends, drawing into it
    // ran a thin dark line out of each corner at "o", "u" and "f", longest in a beard)
    for (const f of faces) {
      for (const v of ['aa', 'E', 'oh', 'ou', 'FF'] as const) {
        const shape = speakingShape(v);
        const cov = await drawnCoverage(synth, f.frame, f.face, shape);
        // along the line between the corners where the shape put them, found by the rig
        const moved = await rigOf(await render(f, shape));
        const [a, b] = [moved.landmarks[61]!, moved.landmarks[291]!];
        const half = Math.hypot(b.x - a.x, b.y - a.y) / 2;
        const [ux, uy] = [(b.x - a.x) / (2 * half), (b.y - a.y) / (2 * half)];
        const [mx, my] = [(a.x + b.x) / 2, (a.y + b.y) / 2];
        let [past, reach] = [0, 0];
        for (let p = 0; p < cov.length; p++) {
          if (cov[p]! <= 0.02) continue;
          const along = Math.abs(((p % f.frame.width) - mx) * ux + (Math.floor(p / f.frame.width) - my) * uy);
          reach = Math.max(reach, along);
          if (along > half + 1) past++;
        }
        const what = `${f.name} ${v}: drawn up to ${(reach / half).toFixed(2)} half widths from the middle`;
        expect(past, what).toBe(0);
      }
    }
  });

  it(
    'moves the skin below the lower lip as a whole: no beard strands sheared into lines at the corners',
    SLOW,
    async () => {
      // (the opening's taper is steep at its ends; when the skin below the lip took it, a beard's strands
      // there fanned out from the corner as thin lines)
      for (const f of faces) {
        for (const v of OPEN_SOUNDS) {
          const shear = skinShear(await warpPlanes(synth, f.frame, f.face, speakingShape(v)));
          expect(shear, `${f.name} ${v}: px of vertical motion per px across`).toBeLessThan(0.85);
        }
      }
    },
  );

  it(
    'moves the lips and the skin under a rounded mouth as a whole: no seam below the ends of a small opening',
    SLOW,
    async () => {
      // (each column of the opening once took its lips' inner crease off its own, up to 2.5 pixels, and the
      // columns beside it none: a vertical line from the lower lip down to the chin at each end of "oo",
      // a step of 0.36-0.41 on Charles Barkla; the fuller rounded lower lip stretches the skin below it
      // evenly instead, up to about 0.36 px per px and no step, and lips closing over a broad smile's teeth
      // for "oo" up to 0.78: within the open sounds' bar)
      for (const f of faces) {
        for (const v of ['ou', 'CH', 'RR'] as const) {
          const planes = await warpPlanes(synth, f.frame, f.face, speakingShape(v));
          expect(skinSeam(planes), `${f.name} ${v}: a step of px of vertical motion per px across`).toBeLessThan(0.3);
          expect(skinShear(planes), `${f.name} ${v}: px of vertical motion per px across`).toBeLessThan(0.85);
        }
      }
    },
  );

  it(
    'gives each kind of sound its shape: round narrows, spread widens, m/b/p presses, f/v tucks the lower lip',
    SLOW,
    async () => {
      const thinning: number[] = [];
      for (const f of faces) {
        const width = (r: FaceRig) =>
          Math.hypot(r.landmarks[61]!.x - r.landmarks[291]!.x, r.landmarks[61]!.y - r.landmarks[291]!.y);
        const lipHeight = (r: FaceRig) => r.landmarks[17]!.y - r.landmarks[0]!.y;
        const rest = f.rig;
        const round = await rigOf(await render(f, speakingShape('ou')));
        const spread = await rigOf(await render(f, speakingShape('ih')));
        const press = await rigOf(await render(f, speakingShape('PP')));
        const what = `${f.name}: width rest ${width(rest).toFixed(1)} round ${width(round).toFixed(1)} spread ${width(spread).toFixed(1)}; lips ${lipHeight(rest).toFixed(1)} pressed ${lipHeight(press).toFixed(1)}`;
        // (on a broad smile the rig finds the corners loosely, and in a full beard hardly at all: there
        // only the direction is held)
        const by = f.ownTeeth || f.name === 'mendeleev' ? 0 : 0.025 * f.face.mouthWidth;
        expect(width(round), what).toBeLessThan(width(rest) - by);
        expect(width(spread), what).toBeGreaterThan(width(rest) + by);
        if (!f.ownTeeth) {
          // (a portrait that shows its teeth closes its lips over them instead: 'closes the lips over ...')
          thinning.push((lipHeight(rest) - lipHeight(press)) / f.face.mouthWidth);
          expect(lipHeight(press), what).toBeLessThan(lipHeight(rest));
          expect(press.mouthOpenness, what).toBeLessThan(rest.mouthOpenness + 0.02);
          // f/v: the upper teeth show under the lifted upper lip, down onto the lower lip
          const shape = speakingShape('FF');
          const cov = await drawnCoverage(synth, f.frame, f.face, shape);
          const lip = keyPoint(f.face, 5);
          let rows = 0;
          for (
            let y = Math.round(lip.y - 0.1 * f.face.mouthWidth);
            y < Math.round(lip.y + 0.1 * f.face.mouthWidth);
            y++
          )
            if (cov[y * f.frame.width + Math.round(lip.x)]! >= 0.5) rows++;
          expect(rows, `${f.name} f: rows of teeth down the middle`).toBeGreaterThanOrEqual(2);
        }
      }
      expect(
        thinning.reduce((a, b) => a + b, 0) / thinning.length,
        `m/b/p: the lips thinner by ${JSON.stringify(thinning)} mouth widths`,
      ).toBeGreaterThan(0.015);
    },
  );

  it('rolls the lower lip in under the upper teeth for f, v: thinner, not a relaxed lip under them', SLOW, async () => {
    // Down the middle column of the warp, the output rows that sample the portrait's lower lip (between
    // its inner and outer key points), against the lip's own thickness. The graph before this one kept
    // the lip whole under the teeth (0.73-0.93, 0.84 on average), which a blind reviewer read as a relaxed
    // lip with teeth laid over it.
    const { mean, listed } = await onPlainFaces(
      async (f) => {
        const planes = (await warpPlanes(synth, f.frame, f.face, speakingShape('FF')))!;
        const [inner, outer] = [planes.point(15), planes.point(35)];
        const column = Math.round((inner.x + outer.x) / 2 - planes.warpAt - 0.5);
        let rows = 0;
        for (let r = 0; r < planes.w; r++) {
          const from = r + planes.warpAt + 0.5 + planes.dv[r * planes.w + column]!;
          if (from >= inner.y && from <= outer.y) rows++;
        }
        return rows / (outer.y - inner.y);
      },
      (share, f) => {
        expect(share, `${f.name}: the lower lip at f, of its thickness`).toBeGreaterThanOrEqual(0.4);
        expect(share, `${f.name}: the lower lip at f, of its thickness`).toBeLessThanOrEqual(0.8);
      },
    );
    expect(mean, listed).toBeLessThanOrEqual(0.7);
  });

  it('opens "o" as an oval, not a wide D under a level upper lip', SLOW, async () => {
    // The drawn opening's width (its widest extent of pixels at least half covered) against its height
    // at the middle. The graph before this one lifted the upper lip of a rounded "o" no more than a
    // small one's and dropped the jaw's whole way below it: a level top over a wide bowl, 1.32 to 1.94
    // times as wide as tall on these faces (1.65 on average), which blind reviewers read as a hole cut in.
    const { mean, listed } = await onPlainFaces(
      async (f) => {
        const coverage = await drawnCoverage(synth, f.frame, f.face, speakingShape('oh'));
        const rows = Array.from({ length: f.frame.width }, (_, x) => coveredRows(coverage, f.frame, x));
        const drawn = rows.flatMap((r, x) => (r.length > 0 ? [x] : []));
        const middle = rows[Math.round((drawn[0]! + drawn.at(-1)!) / 2)]!;
        const [across, tall] = [drawn.at(-1)! - drawn[0]! + 1, middle.at(-1)! - middle[0]! + 1];
        expect(tall, `${f.name}: "o" ${tall} px tall at the middle`).toBeGreaterThanOrEqual(8);
        return across / tall;
      },
      (ratio, f) => expect(ratio, `${f.name}: "o" across / tall`).toBeLessThanOrEqual(1.55),
    );
    expect(mean, listed).toBeLessThanOrEqual(1.4);
  });

  it(
    "keeps a rounded mouth's teeth to the middle of its top: no light rim down the opening's sides",
    SLOW,
    async () => {
      // At "o" and "sh": the mean L* of the opening's first two opaque rows in each column, over its outer 30%
      // of columns on each side against its middle third. The graph before this one drew the teeth to the
      // opening's ends, a thin band following its edge down the sides that a blind reviewer read as "a light
      // band along the whole top edge into the corners, like an outline": 0.947 at "o" and 0.963 at "sh" on
      // average over these faces (each 0.91 to 1.01), 0.909 and 0.926 now (0.85 to 1.01); read blind, 9 rows to
      // none, 5 equal.
      for (const v of ['oh', 'CH'] as const) {
        const { mean, listed } = await onPlainFaces(
          async (f) => {
            const shape = speakingShape(v);
            const [out, coverage] = [await render(f, shape), await drawnCoverage(synth, f.frame, f.face, shape)];
            const lightness = (y: number, x: number) => {
              const i = (y * out.width + x) * 4;
              return toLab(out.data[i]!, out.data[i + 1]!, out.data[i + 2]!)[0];
            };
            const columns = Array.from({ length: out.width }, (_, x) =>
              coveredRows(coverage, out, x)
                .slice(0, 2)
                .map((y) => lightness(y, x)),
            ).filter((top) => top.length > 0);
            const n = columns.length;
            expect(n, `${f.name} ${v}: columns of the opening`).toBeGreaterThanOrEqual(10);
            const mean = (xs: number[]) => xs.reduce((s, q) => s + q, 0) / xs.length;
            const ends = columns.filter((_, i) => i < 0.3 * n || i >= 0.7 * n).flat();
            const middle = columns.filter((_, i) => i >= n / 3 && i < (2 * n) / 3).flat();
            return mean(ends) / mean(middle);
          },
          (ratio, f) =>
            expect(ratio, `${f.name} ${v}: the top edge's ends against its middle`).toBeLessThanOrEqual(1.05),
        );
        expect(mean, `${v}: ${listed}`).toBeLessThanOrEqual(0.94);
      }
    },
  );

  it('keeps "oo" a small dark opening: rounded lips come forward over the upper teeth', SLOW, async () => {
    // Where the drawn interior's median lightness at "oo" sits between the face's own cavity (at "ah",
    // its 10th percentile) and its drawn teeth (at "eh"): 0 is all cavity, 1 all teeth. The graph
    // before this one showed the teeth through the small opening, a pale oval: 0.64-0.77 on these faces.
    const { mean, listed } = await onPlainFaces(
      async (f) => {
        const teeth = (await pictureAt(f, 'E')).picture.teeth!.lab[0];
        const cavity = (await pictureAt(f, 'aa')).picture.cavity!.p10;
        const round = await pictureAt(f, 'ou');
        return (medianLab(round.out, opaquePixels(round.coverage))[0] - cavity) / (teeth - cavity);
      },
      (share, f) => expect(share, `${f.name}: "oo" between cavity and teeth`).toBeLessThan(0.7),
    );
    expect(mean, listed).toBeLessThan(0.55);
  });

  it('relaxes a smile while talking and gives it back in silence', SLOW, async () => {
    for (const f of faces.filter((x) => x.name === 'astronaut')) {
      const lift = (r: FaceRig) =>
        (r.landmarks[13]!.y + r.landmarks[14]!.y) / 2 - (r.landmarks[61]!.y + r.landmarks[291]!.y) / 2;
      const talking = await rigOf(await render(f, { ...VISEME_PARAMS.nn, relax: 1 }));
      const smiling = await rigOf(await render(f, { ...VISEME_PARAMS.nn, relax: 0 }));
      expect(
        lift(talking),
        `${f.name}: corners above the middle, talking ${lift(talking).toFixed(1)} px, smiling ${lift(smiling).toFixed(1)} px`,
      ).toBeLessThan(lift(smiling) - 0.02 * f.face.mouthWidth);
    }
  });

  it('does not flicker: a shape that barely changes barely changes the inner mouth', SLOW, async () => {
    // (a drawn inside: one open mid-speech shows its own)
    for (const f of faces.filter((x) => !x.openMidSpeech)) {
      const shapes = [0.5, 0.503, 0.506, 0.509].map((open) => ({ ...speakingShape('aa'), open }));
      const outs = await Promise.all(shapes.map((s) => render(f, s)));
      const covs = await Promise.all(shapes.map((s) => drawnCoverage(synth, f.frame, f.face, s)));
      let [n, sum] = [0, 0];
      for (let p = 0; p < covs[0]!.length; p++) {
        if (!covs.every((c) => c[p]! >= 0.99)) continue;
        const l = outs.map((o) => luma(o.data, p * 4));
        const m = l.reduce((s, v) => s + v, 0) / l.length;
        sum += Math.sqrt(l.reduce((s, v) => s + (v - m) ** 2, 0) / l.length);
        n++;
      }
      expect(n, f.name).toBeGreaterThan(20);
      expect(sum / n, `${f.name}: mean temporal std of the inner mouth's luma`).toBeLessThan(1.5);
    }
  });

  it('opens cleanly: the first pixel of an opening is already opaque (no translucent smear)', SLOW, async () => {
    // (on the sharp photographs: a soft one gets edges as soft as its own)
    for (const f of faces.filter((x) => ['grace_hopper', 'biden', 'obama_small'].includes(x.name))) {
      const mid = keyPoint(f.face, 5);
      for (const open of [0.06, 0.1, 0.15, 0.2]) {
        const cov = await drawnCoverage(synth, f.frame, f.face, { ...speakingShape('DD'), open });
        let [total, peak] = [0, 0];
        for (
          let y = Math.round(mid.y - 0.15 * f.face.mouthWidth);
          y < Math.round(mid.y + 0.3 * f.face.mouthWidth);
          y++
        ) {
          const c = cov[y * f.frame.width + Math.round(mid.x)]!;
          total += c;
          peak = Math.max(peak, c);
        }
        // the layer is drawn at the crop's resolution (about 1.4 frame pixels a crop pixel here) with
        // edges as soft as the photograph's own, so a 2-pixel opening spreads over four frame pixels
        const what = `${f.name} open ${open}: coverage sum ${total.toFixed(2)}, peak ${peak.toFixed(2)} down the middle`;
        if (total >= 2.5) expect(peak, what).toBeGreaterThanOrEqual(0.8);
        if (total >= 4) expect(peak, what).toBeGreaterThanOrEqual(0.95);
      }
    }
  });

  it(
    "follows the speech as the previous renderer did: the rig's openness against the track and the audio's loudness, and no later",
    SLOW,
    async () => {
      const speech = await synthesize({ text: 'Open wide, then close. Say ah, and stop.' });
      const fps = 25;
      const track = visemeTrack(speech.phones, fps, { durationSeconds: speech.durationSeconds });
      const hop = speech.sampleRate / fps;
      const loudness = track.frames.map((_, k) => {
        let e = 0;
        for (let i = Math.round(k * hop); i < Math.min(speech.samples.length, Math.round((k + 1) * hop)); i++)
          e += (speech.samples[i]! / 32768) ** 2;
        return Math.sqrt(e / hop);
      });
      const opening = track.frames.map((m) => (m.closed ? 0 : m.open));
      /** The lag in frames (-2..2) at which the measured openness best matches the loudness. */
      const bestLag = (measured: number[]) => {
        let [lag, best] = [0, -Infinity];
        for (let d = -2; d <= 2; d++) {
          const r = pearson(
            measured.slice(Math.max(0, d), measured.length + Math.min(0, d)),
            loudness.slice(Math.max(0, -d), loudness.length + Math.min(0, -d)),
          );
          if (r > best) [lag, best] = [d, r];
        }
        return lag;
      };
      // Faces the rig measures reliably (a full beard hides the lips from it, and a portrait's own
      // open mouth is not at rest).
      const some = faces.filter((x) => ['grace_hopper', 'biden', 'barkla', 'curie'].includes(x.name));
      expect(some.length).toBe(4);
      for (const f of some) {
        const score: Record<string, { track: number; loudness: number; lag: number }> = {};
        for (const [name, engine] of [
          ['current', synth],
          ['previous', previous],
        ] as const) {
          const measured: number[] = [];
          for (const m of track.frames)
            measured.push((await rigOf(await render(f, mouthShape(m), engine))).mouthOpenness);
          score[name] = {
            track: pearson(measured, opening),
            loudness: pearson(measured, loudness),
            lag: bestLag(measured),
          };
        }
        const what = `${f.name}: ${JSON.stringify(score)}; the track's own opening against the loudness ${pearson(opening, loudness).toFixed(3)}`;
        // the picture carries the track's opening as faithfully as before...
        expect(score.current!.track, what).toBeGreaterThan(0.9);
        expect(score.current!.track, what).toBeGreaterThanOrEqual(score.previous!.track - 0.05);
        // ...and with it what the track has of the audio (the previous one kept "oo" as open as "ah",
        // which the loudness happens to favour)...
        expect(score.current!.loudness, what).toBeGreaterThanOrEqual(pearson(opening, loudness) - 0.15);
        // ...at the same time.
        expect(Math.abs(score.current!.lag - score.previous!.lag), what).toBeLessThanOrEqual(1);
      }
    },
  );
});
