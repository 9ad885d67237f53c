/**
 * The motion model: per-frame parameters (head rotation and translation, breathing,
 * blinks, brows, smile, gaze) -> a frame, by a smooth backward warp of the framed
 * portrait, plus the face rig moved by the same warp.
 *
 * Layers, applied to a source point q0 of the framed (neutral) portrait in this order:
 *   1. eyelids (per eye, in the eye's own axis): the lid band between the crease and the
 *      lash line is stretched down over the eye; the lower lid rises a little (blink,
 *      squint); the eye's interior slides under the lids (gaze);
 *   2. brows: a vertical lift (or drop) with falloff up the forehead and down to the lid;
 *   3. smile: Gaussian pushes at the mouth corners (out and up) and the cheeks (up);
 *   4. head: a rigid 3D rotation (yaw, pitch, roll) and translation of the head, using a
 *      depth per pixel (the landmarks' z on the face, an ellipsoid fitted to them beyond),
 *      projected orthographically, faded out over the neck, the hair edge and the
 *      background by a head mask; breathing lifts the torso and the head by a pixel or two.
 * Each layer is a continuous map, so nothing tears. The frame is rendered backwards: for
 * each output pixel the inverse chain gives the source point, sampled bilinearly. Layer 4
 * is smooth and is solved on a coarse grid (every `gridStep` px; 3-4 fixed-point steps per
 * node) and interpolated; layers 1-3 are evaluated per pixel, only inside their boxes.
 * Landmarks go forwards through the same layers; layer 4 is inverted numerically against
 * the very grid the pixels use, so the moved rig agrees with the rendered pixels.
 *
 * Why TypeScript typed arrays and not an ONNX GridSample graph: generation runs offline,
 * once per clip, never on the realtime path; all the work that is not sampling is
 * landmark-driven per-region geometry with branches (lid bands, occlusion) that a graph
 * would express awkwardly; and a 512x512 frame costs ~15 ms on one core here (bench.ts:
 * 2.4x realtime at 25 fps), fine for a background job run once per clip. The sampling is the
 * part a GPU would speed up; the warp is a displacement field + bilinear sampling, so a
 * GridSample port stays possible.
 */
import { rigFromLandmarks } from '../rig/assemble.ts';
import { boundingBox } from '../rig/geometry.ts';
import type { FaceRig, Point3 } from '../rig/types.ts';
import type { FramedPortrait } from './framing.ts';

/** One frame's motion. All zero (NEUTRAL_PARAMS) renders the framed portrait unchanged. */
export interface MotionParams {
  /** Degrees. Positive: the nose turns towards the image's right (the subject's left). */
  yaw: number;
  /** Degrees. Positive: chin up (nose up). */
  pitch: number;
  /** Degrees. Positive: the head tilts clockwise in the image. */
  roll: number;
  /** Head translation in face widths (x right, y down in the face's frame). */
  tx: number;
  ty: number;
  /** Breathing, 0 (exhaled) to 1 (inhaled): lifts the torso and head slightly. */
  breath: number;
  /** Eyelid closure per eye (the subject's own), 0 open, 1 shut; down to -0.3 widens. */
  blinkLeft: number;
  blinkRight: number;
  /** Lower lids raised (a smile's or a squint's narrowing), 0 to 1. */
  squint: number;
  /** Brows: 1 raised (surprise), 0 rest, -1 lowered (frown, concentration). */
  brow: number;
  /** Mouth corners out and up, cheeks up: 0 to 1. */
  smile: number;
  /** Gaze inside the eye opening: -1..1, x towards the image's right, y down. */
  gazeX: number;
  gazeY: number;
}

export const NEUTRAL_PARAMS: Readonly<MotionParams> = Object.freeze({
  yaw: 0,
  pitch: 0,
  roll: 0,
  tx: 0,
  ty: 0,
  breath: 0,
  blinkLeft: 0,
  blinkRight: 0,
  squint: 0,
  brow: 0,
  smile: 0,
  gazeX: 0,
  gazeY: 0,
});

export const PARAM_NAMES = Object.keys(NEUTRAL_PARAMS) as (keyof MotionParams)[];

/** Clamp ranges that keep every layer a valid (fold-free) warp. */
const PARAM_LIMITS: Readonly<Record<keyof MotionParams, readonly [number, number]>> = Object.freeze({
  yaw: [-20, 20],
  pitch: [-15, 15],
  roll: [-15, 15],
  tx: [-0.1, 0.1],
  ty: [-0.1, 0.1],
  breath: [0, 1],
  blinkLeft: [-0.3, 1],
  blinkRight: [-0.3, 1],
  squint: [0, 1],
  brow: [-1, 1],
  smile: [0, 1],
  gazeX: [-1, 1],
  gazeY: [-1, 1],
});

export function clampParams(p: MotionParams): MotionParams {
  const out = { ...p };
  for (const k of PARAM_NAMES) {
    const [lo, hi] = PARAM_LIMITS[k];
    const v = Number.isFinite(out[k]) ? out[k] : 0;
    out[k] = Math.min(hi, Math.max(lo, v));
  }
  return out;
}

export interface MotionFrame {
  /** Tightly packed RGBA, alpha 255. */
  rgba: Uint8Array;
  /** The 468 landmarks moved by the same warp (z rotated with the head). */
  landmarks: Point3[];
}

export interface MotionModelOptions {
  /** Spacing of the head-motion grid in pixels, default 8. */
  gridStep?: number;
}

const DEG = Math.PI / 180;

function smoothstep(t: number): number {
  if (t <= 0) return 0;
  if (t >= 1) return 1;
  return t * t * (3 - 2 * t);
}

/** Piecewise-linear curve v(u) over sorted knots; flat beyond the ends. */
class Curve {
  constructor(
    readonly us: Float64Array,
    readonly vs: Float64Array,
  ) {}
  static of(points: { u: number; v: number }[]): Curve {
    const s = [...points].sort((a, b) => a.u - b.u);
    return new Curve(Float64Array.from(s.map((p) => p.u)), Float64Array.from(s.map((p) => p.v)));
  }
  at(u: number): number {
    const { us, vs } = this;
    const n = us.length;
    if (u <= us[0]!) return vs[0]!;
    if (u >= us[n - 1]!) return vs[n - 1]!;
    let i = 1;
    while (us[i]! < u) i++;
    const u0 = us[i - 1]!;
    const u1 = us[i]!;
    const t = u1 > u0 ? (u - u0) / (u1 - u0) : 0;
    return vs[i - 1]! + (vs[i]! - vs[i - 1]!) * t;
  }
}

/** A local orthonormal frame: u along `axis`, v perpendicular (image-down for a level axis). */
interface Frame2 {
  ox: number;
  oy: number;
  ax: number;
  ay: number;
}
const toU = (f: Frame2, x: number, y: number): number => (x - f.ox) * f.ax + (y - f.oy) * f.ay;
const toV = (f: Frame2, x: number, y: number): number => -(x - f.ox) * f.ay + (y - f.oy) * f.ax;

interface Box {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

/** Subject's right eye: contour from render/rig/topology (outer 33 ... inner 133 ... back). */
const EYE_INDICES = {
  right: { upper: [33, 246, 161, 160, 159, 158, 157, 173, 133], lower: [133, 155, 154, 153, 145, 144, 163, 7, 33] },
  left: { upper: [263, 466, 388, 387, 386, 385, 384, 398, 362], lower: [362, 382, 381, 380, 374, 373, 390, 249, 263] },
} as const;
/** (upper, lower) lid landmarks facing each other, outer to inner: [subject's right eye, left eye]. */
const LID_PAIRS: readonly (readonly (readonly [number, number])[])[] = [
  [
    [246, 7],
    [161, 163],
    [160, 144],
    [159, 145],
    [158, 153],
    [157, 154],
    [173, 155],
  ],
  [
    [466, 249],
    [388, 390],
    [387, 373],
    [386, 374],
    [385, 380],
    [384, 381],
    [398, 382],
  ],
];
const BROW_INDICES = {
  right: { upper: [70, 63, 105, 66, 107], lower: [46, 53, 52, 65, 55], lid: 159 },
  left: { upper: [300, 293, 334, 296, 336], lower: [276, 283, 282, 295, 285], lid: 386 },
} as const;

interface EyeModel {
  f: Frame2;
  ua: number;
  ub: number;
  upper: Curve;
  lower: Curve;
  gap: number;
  crease: number;
  under: number;
  box: Box;
  width: number;
  /** Height of the lash line kept unstretched at the lid's edge. */
  lash: number;
  /** Lid skin colour (sampled above the eye), blended into the stretched lid. */
  skin: [number, number, number];
}

interface BrowModel {
  line: Curve;
  u0: number;
  u1: number;
  lid: number;
  d: number;
}

interface Bump {
  cx: number;
  cy: number;
  /** Displacement at full strength. */
  dx: number;
  dy: number;
  inv2s2: number;
}

/** Per-eye state for one frame (see EyeModel). */
interface EyeState {
  on: boolean;
  close: number;
  squint: number;
  gx: number;
  gy: number;
}

export class MotionModel {
  readonly width: number;
  readonly height: number;
  readonly rig: FaceRig;
  private readonly src: Uint8Array;
  private readonly step: number;
  private readonly gw: number;
  private readonly gh: number;
  /** Static grids at the nodes: head weight, depth, torso weight. */
  private readonly wHead: Float32Array;
  private readonly depth: Float32Array;
  private readonly wTorso: Float32Array;
  /** Per-frame backward map of layer 4 at the nodes. */
  private readonly mapX: Float32Array;
  private readonly mapY: Float32Array;
  /** Per output column: grid cell and fraction. */
  private readonly colI: Int32Array;
  private readonly colF: Float32Array;
  private readonly face: Frame2;
  private readonly faceW: number;
  private readonly cz: number;
  private readonly pitchPivotV: number;
  private readonly rollPivotV: number;
  private readonly torsoCu: number;
  private readonly brows: BrowModel[];
  private readonly browBox: Box;
  private readonly smileBox: Box;
  private readonly smileField: TabulatedField;
  // Per-frame state of layers 1-3.
  /** [subject's right, subject's left] */
  private readonly eyeStates: EyeState[] = [blankEye(), blankEye()];
  private readonly eyeList: EyeModel[];
  /** Skin tint of the pixel just mapped by exprBackward: weight and colour. */
  private tintW = 0;
  private tintR = 0;
  private tintG = 0;
  private tintB = 0;
  private browLift = 0;
  private smileAmt = 0;
  private activeBox: Box = { x0: 0, y0: 0, x1: -1, y1: -1 };
  // Scratch for point maps (no allocation in the pixel loop).
  private rx = 0;
  private ry = 0;
  // Head transform of the current frame.
  private cy0 = 1;
  private sy0 = 0;
  private cp = 1;
  private sp = 0;
  private cr = 1;
  private sr = 0;
  private tu = 0;
  private tv = 0;
  private breathLift = 0;
  private breathWiden = 0;

  constructor(framed: FramedPortrait, options: MotionModelOptions = {}) {
    const { width: W, height: H, rig } = framed;
    this.width = W;
    this.height = H;
    this.rig = rig;
    this.src = framed.rgba;
    const lm = rig.landmarks;
    this.step = options.gridStep ?? 8;
    this.gw = Math.ceil(W / this.step) + 1;
    this.gh = Math.ceil(H / this.step) + 1;
    const n = this.gw * this.gh;
    this.wHead = new Float32Array(n);
    this.depth = new Float32Array(n);
    this.wTorso = new Float32Array(n);
    this.mapX = new Float32Array(n);
    this.mapY = new Float32Array(n);
    this.colI = new Int32Array(W);
    this.colF = new Float32Array(W);
    for (let i = 0; i < W; i++) {
      const gx = (i + 0.5) / this.step;
      this.colI[i] = gx | 0;
      this.colF[i] = gx - (gx | 0);
    }

    // The face's own frame: u along the eye line, v down the face, origin at the box centre.
    const eR = lm[33]!;
    const eL = lm[263]!;
    const a = Math.atan2(eL.y - eR.y, eL.x - eR.x);
    const box = rig.box;
    this.face = { ox: box.x + box.width / 2, oy: box.y + box.height / 2, ax: Math.cos(a), ay: Math.sin(a) };
    const faceW = box.width;
    const faceH = box.height;
    this.faceW = faceW;
    const f = this.face;
    const vOf = (i: number): number => toV(f, lm[i]!.x, lm[i]!.y);
    const vChin = vOf(152);
    const vNose = vOf(2);
    this.pitchPivotV = vNose;
    this.rollPivotV = (vOf(13) + vChin) / 2;
    this.torsoCu = 0;

    // Head ellipse (hair, ears, the top of the skull beyond the mesh) and its fade.
    const ax = 0.68 * faceW;
    const ay = 0.72 * faceH;
    const ecv = vChin + 0.04 * ay - ay;
    // Fade: wide above and beside the head (hair, background), short below it (shoulders).
    const fadeAt = (u: number, v: number, r: number): number => {
      const down = r > 0 ? (v - ecv) / ay / r : 0; // cos of the angle from straight down
      const wdt = down > 0 ? 0.8 - 0.45 * down : 0.8 + 0.2 * -down;
      return 1 - smoothstep((r - 1) / wdt);
    };
    // Depth: an ellipsoid about the pivot depth, fitted to the mesh, plus the mesh's own
    // relief (landmark z minus the ellipsoid) spread smoothly around each landmark.
    let zMax = -Infinity;
    for (const p of lm) zMax = Math.max(zMax, p.z);
    const cz = zMax + 0.05 * faceW;
    this.cz = cz;
    const ellR = (u: number, v: number): number => Math.hypot(u / ax, (v - ecv) / ay);
    let num = 0;
    let den = 0;
    const lmU = new Float64Array(lm.length);
    const lmV = new Float64Array(lm.length);
    lm.forEach((p, i) => {
      lmU[i] = toU(f, p.x, p.y);
      lmV[i] = toV(f, p.x, p.y);
      const r = ellR(lmU[i]!, lmV[i]!);
      if (r < 0.95) {
        const s = Math.sqrt(1 - r * r);
        num += (cz - p.z) * s;
        den += s * s;
      }
    });
    const Rz = den > 0 ? num / den : 0.5 * faceW;
    const ellZ = (u: number, v: number): number => {
      const r = ellR(u, v);
      return r >= 1 ? cz : cz - Rz * Math.sqrt(1 - r * r);
    };
    const resid = new Float64Array(lm.length);
    lm.forEach((p, i) => (resid[i] = p.z - ellZ(lmU[i]!, lmV[i]!)));
    const sig = 0.06 * faceW;
    const inv2s2 = 1 / (2 * sig * sig);
    const cut = (3 * sig) ** 2;
    for (let j = 0; j < this.gh; j++) {
      for (let i = 0; i < this.gw; i++) {
        const x = i * this.step;
        const y = j * this.step;
        const u = toU(f, x, y);
        const v = toV(f, x, y);
        const k = j * this.gw + i;
        const r = ellR(u, v);
        this.wHead[k] = fadeAt(u, v, r);
        // Relief: normalised Gaussian average, fading to 0 (pure ellipsoid) away from the mesh.
        let sw = 0;
        let sz = 0;
        for (let m = 0; m < lm.length; m++) {
          const du = u - lmU[m]!;
          const dv = v - lmV[m]!;
          const d2 = du * du + dv * dv;
          if (d2 > cut) continue;
          const w = Math.exp(-d2 * inv2s2);
          sw += w;
          sz += w * resid[m]!;
        }
        this.depth[k] = ellZ(u, v) + sz / (sw + 0.05);
        // Torso: below the neck, as wide as the shoulders.
        const tv = smoothstep((v - (vChin + 0.15 * faceH)) / (0.45 * faceH));
        const tu = 1 - smoothstep((Math.abs(u) - 1.4 * faceW) / (0.8 * faceW));
        this.wTorso[k] = tv * tu;
      }
    }

    // Eyes.
    const eyeModel = (idx: { upper: readonly number[]; lower: readonly number[] }): EyeModel => {
      const c0 = lm[idx.upper[0]!]!;
      const c1 = lm[idx.upper[idx.upper.length - 1]!]!;
      const [pa, pb] = c0.x <= c1.x ? [c0, c1] : [c1, c0];
      const len = Math.hypot(pb.x - pa.x, pb.y - pa.y);
      const fr: Frame2 = {
        ox: (pa.x + pb.x) / 2,
        oy: (pa.y + pb.y) / 2,
        ax: (pb.x - pa.x) / len,
        ay: (pb.y - pa.y) / len,
      };
      const pts = (ids: readonly number[]) =>
        ids.map((i) => ({ u: toU(fr, lm[i]!.x, lm[i]!.y), v: toV(fr, lm[i]!.x, lm[i]!.y) }));
      const upper = Curve.of(pts(idx.upper));
      const lower = Curve.of(pts(idx.lower));
      const ua = -len / 2;
      const ub = len / 2;
      let gap = 0;
      for (let t = 0; t <= 20; t++) {
        const u = ua + ((ub - ua) * t) / 20;
        gap = Math.max(gap, lower.at(u) - upper.at(u));
      }
      const crease = 0.75 * gap;
      const under = 0.6 * gap;
      // Box in image pixels around the band region.
      const corners = [
        [ua, -gap - crease],
        [ub, -gap - crease],
        [ua, gap + under],
        [ub, gap + under],
      ].map(([u, v]) => ({ x: fr.ox + u! * fr.ax - v! * fr.ay, y: fr.oy + u! * fr.ay + v! * fr.ax }));
      const lash = 0.22 * gap;
      return {
        f: fr,
        ua,
        ub,
        upper,
        lower,
        gap,
        crease,
        under,
        width: len,
        box: boxOf(corners, 2),
        lash,
        skin: lidSkin(framed, fr, ua, ub, upper, crease, lash),
      };
    };
    this.eyeList = [eyeModel(EYE_INDICES.right), eyeModel(EYE_INDICES.left)];

    // Brows.
    this.brows = (['right', 'left'] as const).map((side) => {
      const b = BROW_INDICES[side];
      const mid = b.upper.map((ui, k) => {
        const p = lm[ui]!;
        const q = lm[b.lower[k]!]!;
        return { u: toU(f, (p.x + q.x) / 2, (p.y + q.y) / 2), v: toV(f, (p.x + q.x) / 2, (p.y + q.y) / 2) };
      });
      const line = Curve.of(mid);
      const lid = vOf(b.lid);
      const meanV = mid.reduce((s, p) => s + p.v, 0) / mid.length;
      return {
        line,
        u0: line.us[0]!,
        u1: line.us[line.us.length - 1]!,
        lid,
        d: Math.max(2, lid - meanV),
      };
    });
    const browPts: { x: number; y: number }[] = [];
    for (const b of this.brows) {
      const span = b.u1 - b.u0;
      for (let t = 0; t <= 20; t++) {
        const u = b.u0 - 0.45 * span + (t / 20) * 1.9 * span;
        for (const v of [b.line.at(u) - 1.4 * b.d, b.lid])
          browPts.push({ x: f.ox + u * f.ax - v * f.ay, y: f.oy + u * f.ay + v * f.ax });
      }
    }
    this.browBox = boxOf(browPts, 3);

    // Smile: mouth corners out and up, cheeks up ("up" is the face's up).
    const cR = lm[61]!;
    const cL = lm[291]!;
    const mW = Math.hypot(cL.x - cR.x, cL.y - cR.y);
    const mc = { x: (cR.x + cL.x) / 2, y: (cR.y + cL.y) / 2 };
    const up = { x: f.ay, y: -f.ax };
    const bumps: Bump[] = [];
    for (const [c, eyeOuter] of [
      [cR, lm[33]!],
      [cL, lm[263]!],
    ] as const) {
      const ol = Math.hypot(c.x - mc.x, c.y - mc.y) || 1;
      const o = { x: (c.x - mc.x) / ol, y: (c.y - mc.y) / ol };
      const s1 = 0.3 * mW;
      bumps.push({
        cx: c.x,
        cy: c.y,
        dx: 0.08 * mW * o.x + 0.12 * mW * up.x,
        dy: 0.08 * mW * o.y + 0.12 * mW * up.y,
        inv2s2: 1 / (2 * s1 * s1),
      });
      const k = { x: c.x + (eyeOuter.x - c.x) * 0.45, y: c.y + (eyeOuter.y - c.y) * 0.45 };
      const s2 = 0.45 * mW;
      bumps.push({ cx: k.x, cy: k.y, dx: 0.07 * mW * up.x, dy: 0.07 * mW * up.y, inv2s2: 1 / (2 * s2 * s2) });
    }
    const sp: { x: number; y: number }[] = [];
    for (const b of bumps) {
      const r = 2.8 / Math.sqrt(2 * b.inv2s2);
      sp.push({ x: b.cx - r, y: b.cy - r }, { x: b.cx + r, y: b.cy + r });
    }
    this.smileBox = boxOf(sp, 0);
    this.smileField = new TabulatedField(this.smileBox, 4, (x, y) => {
      let dx = 0;
      let dy = 0;
      for (const b of bumps) {
        const g = Math.exp(-((x - b.cx) ** 2 + (y - b.cy) ** 2) * b.inv2s2);
        dx += b.dx * g;
        dy += b.dy * g;
      }
      return [dx, dy];
    });
  }

  /** Render one frame (into `out` when given: width*height*4 bytes). */
  render(params: MotionParams, out?: Uint8Array): MotionFrame {
    const p = clampParams(params);
    this.setup(p);
    const W = this.width;
    const H = this.height;
    const dst = out ?? new Uint8Array(W * H * 4);
    const src = this.src;
    const step = this.step;
    const gw = this.gw;
    const mapX = this.mapX;
    const mapY = this.mapY;
    const ab = this.activeBox;
    const anyExpr = ab.x1 > ab.x0;
    const colI = this.colI;
    const colF = this.colF;
    const inv = 1 / step;
    const Wm1 = W - 1;
    const Hm1 = H - 1;
    const W4 = W * 4;
    let o = 0;
    for (let j = 0; j < H; j++) {
      const gy = (j + 0.5) * inv;
      const j0 = gy | 0;
      const fy = gy - j0;
      const row0 = j0 * gw;
      const row1 = row0 + gw;
      for (let i = 0; i < W; i++) {
        const i0 = colI[i]!;
        const fx = colF[i]!;
        const a00 = row0 + i0;
        const a10 = row1 + i0;
        const x00 = mapX[a00]!;
        const x10 = mapX[a10]!;
        const y00 = mapY[a00]!;
        const y10 = mapY[a10]!;
        const mx0 = x00 + (mapX[a00 + 1]! - x00) * fx;
        const mx1 = x10 + (mapX[a10 + 1]! - x10) * fx;
        const my0 = y00 + (mapY[a00 + 1]! - y00) * fx;
        const my1 = y10 + (mapY[a10 + 1]! - y10) * fx;
        let qx = mx0 + (mx1 - mx0) * fy;
        let qy = my0 + (my1 - my0) * fy;
        let tint = 0;
        if (anyExpr && qx >= ab.x0 && qx <= ab.x1 && qy >= ab.y0 && qy <= ab.y1) {
          this.exprBackward(qx, qy);
          qx = this.rx;
          qy = this.ry;
          tint = this.tintW;
        }
        // Bilinear sample, pixel centres at integer + 0.5, clamped at the edges.
        let sx = qx - 0.5;
        let sy = qy - 0.5;
        if (sx < 0) sx = 0;
        else if (sx > Wm1) sx = Wm1;
        if (sy < 0) sy = 0;
        else if (sy > Hm1) sy = Hm1;
        const x0 = sx | 0;
        const y0 = sy | 0;
        const tx = sx - x0;
        const ty = sy - y0;
        const dx = x0 < Wm1 ? 4 : 0;
        const s00 = (y0 * W + x0) << 2;
        const s10 = s00 + (y0 < Hm1 ? W4 : 0);
        const w11 = tx * ty;
        const w10 = ty - w11;
        const w01 = tx - w11;
        const w00 = 1 - tx - ty + w11;
        let r = src[s00]! * w00 + src[s00 + dx]! * w01 + src[s10]! * w10 + src[s10 + dx]! * w11;
        let g = src[s00 + 1]! * w00 + src[s00 + dx + 1]! * w01 + src[s10 + 1]! * w10 + src[s10 + dx + 1]! * w11;
        let b = src[s00 + 2]! * w00 + src[s00 + dx + 2]! * w01 + src[s10 + 2]! * w10 + src[s10 + dx + 2]! * w11;
        if (tint > 0) {
          r += (this.tintR - r) * tint;
          g += (this.tintG - g) * tint;
          b += (this.tintB - b) * tint;
        }
        dst[o] = r + 0.5;
        dst[o + 1] = g + 0.5;
        dst[o + 2] = b + 0.5;
        dst[o + 3] = 255;
        o += 4;
      }
    }
    return { rgba: dst, landmarks: this.moveLandmarks(p) };
  }

  /** The landmarks of a frame with these parameters, without rendering it. */
  landmarks(params: MotionParams): Point3[] {
    const p = clampParams(params);
    this.setup(p);
    return this.moveLandmarks(p);
  }

  /** The full face rig of a frame with these parameters. */
  rigFor(params: MotionParams, landmarks = this.landmarks(params)): FaceRig {
    return rigFromLandmarks(
      landmarks,
      { width: this.width, height: this.height },
      this.rig.detection,
      this.rig.presence,
    );
  }

  // ---- per-frame setup -------------------------------------------------------------

  private setup(p: MotionParams): void {
    this.cy0 = Math.cos(p.yaw * DEG);
    this.sy0 = Math.sin(p.yaw * DEG);
    this.cp = Math.cos(p.pitch * DEG);
    this.sp = Math.sin(p.pitch * DEG);
    this.cr = Math.cos(p.roll * DEG);
    this.sr = Math.sin(p.roll * DEG);
    this.tu = p.tx * this.faceW;
    this.tv = p.ty * this.faceW;
    this.breathLift = 0.012 * this.faceW * p.breath;
    this.breathWiden = 0.005 * p.breath;
    const closes = [p.blinkRight, p.blinkLeft];
    for (let e = 0; e < 2; e++) {
      const s = this.eyeStates[e]!;
      s.close = closes[e]!;
      s.squint = p.squint;
      s.gx = p.gazeX;
      s.gy = p.gazeY;
      s.on = Math.abs(s.close) > 1e-4 || s.squint > 1e-4 || Math.abs(s.gx) > 1e-4 || Math.abs(s.gy) > 1e-4;
    }
    this.browLift = p.brow >= 0 ? 0.45 * p.brow : 0.3 * p.brow;
    this.smileAmt = p.smile;
    const boxes: Box[] = [];
    for (let e = 0; e < 2; e++) if (this.eyeStates[e]!.on) boxes.push(this.eyeList[e]!.box);
    if (Math.abs(this.browLift) > 1e-4) boxes.push(this.browBox);
    this.activeBox = boxes.length ? unionBox(boxes) : { x0: 0, y0: 0, x1: -1, y1: -1 };
    this.solveGrid();
  }

  /** Layer 4 forward displacement at a source point, with the static grids looked up there. */
  private headForward(x: number, y: number): void {
    const g = this.sampleStatic(x, y);
    const w = this.sw;
    const z = g;
    const wt = this.st;
    const f = this.face;
    const u = toU(f, x, y);
    const v = toV(f, x, y);
    let du = 0;
    let dv = 0;
    if (w > 0) {
      const zc = z - this.cz;
      // yaw about the face's vertical axis through the pivot depth
      const u1 = u * this.cy0 - zc * this.sy0;
      const z1 = u * this.sy0 + zc * this.cy0;
      // pitch about a horizontal axis at nose-base height
      const vp = v - this.pitchPivotV;
      const v2 = this.pitchPivotV + vp * this.cp + z1 * this.sp;
      // roll about a point on the neck
      const vr = v2 - this.rollPivotV;
      const u3 = u1 * this.cr - vr * this.sr + this.tu;
      const v3 = this.rollPivotV + u1 * this.sr + vr * this.cr + this.tv;
      du = w * (u3 - u);
      dv = w * (v3 - v);
    }
    // breathing: torso (and the head on it) rises, shoulders widen a touch
    const lift = this.breathLift * Math.max(wt, w);
    du += this.breathWiden * wt * (u - this.torsoCu);
    dv -= lift;
    this.rx = du * f.ax - dv * f.ay;
    this.ry = du * f.ay + dv * f.ax;
  }

  // The grid cell of the last gridCell call: its top-left node and bilinear weights.
  private cellA = 0;
  private cellW00 = 0;
  private cellW01 = 0;
  private cellW10 = 0;
  private cellW11 = 0;
  /** Locates (x, y) on the grid (clamped to it) for gridAt. */
  private gridCell(x: number, y: number): void {
    const gx = Math.min(Math.max(x / this.step, 0), this.gw - 1.001);
    const gy = Math.min(Math.max(y / this.step, 0), this.gh - 1.001);
    const i0 = Math.floor(gx);
    const j0 = Math.floor(gy);
    const fx = gx - i0;
    const fy = gy - j0;
    this.cellA = j0 * this.gw + i0;
    this.cellW00 = (1 - fx) * (1 - fy);
    this.cellW01 = fx * (1 - fy);
    this.cellW10 = (1 - fx) * fy;
    this.cellW11 = fx * fy;
  }

  /** Bilinear value of a grid at the point of the last gridCell call. */
  private gridAt(g: Float32Array): number {
    const a = this.cellA;
    const b = a + this.gw;
    return g[a]! * this.cellW00 + g[a + 1]! * this.cellW01 + g[b]! * this.cellW10 + g[b + 1]! * this.cellW11;
  }

  private sw = 0;
  private st = 0;
  /** Bilinear lookup of the static grids; returns depth, sets sw (head) and st (torso). */
  private sampleStatic(x: number, y: number): number {
    this.gridCell(x, y);
    this.sw = this.gridAt(this.wHead);
    this.st = this.gridAt(this.wTorso);
    return this.gridAt(this.depth);
  }

  /** Backward map of layer 4 at every node: q with q + D(q) = node, by fixed-point steps. */
  private solveGrid(): void {
    for (let j = 0; j < this.gh; j++) {
      for (let i = 0; i < this.gw; i++) {
        const px = i * this.step;
        const py = j * this.step;
        let qx = px;
        let qy = py;
        for (let it = 0; it < 5; it++) {
          this.headForward(qx, qy);
          qx = px - this.rx;
          qy = py - this.ry;
        }
        if (this.smileAmt > 1e-4 && inBox(this.smileBox, qx, qy)) {
          // Layer 3 is smooth (sigma >= 0.3 mouth widths), so it rides on the same grid:
          // q + a S(q) = x  =>  q = x - a S(q), by fixed-point steps (|grad S| < 0.3).
          const sf = this.smileField;
          const a = this.smileAmt;
          const x = qx;
          const y = qy;
          for (let it = 0; it < 4; it++) {
            sf.sample(qx, qy);
            qx = x - a * sf.dx;
            qy = y - a * sf.dy;
          }
        }
        const k = j * this.gw + i;
        this.mapX[k] = qx;
        this.mapY[k] = qy;
      }
    }
  }

  /** The grid's backward map at any point (as the pixel loop interpolates it). */
  private gridBackward(x: number, y: number): void {
    this.gridCell(x, y);
    this.rx = this.gridAt(this.mapX);
    this.ry = this.gridAt(this.mapY);
  }

  // ---- layers 1-3 --------------------------------------------------------------------

  /** Backward through brows and eyelids (the smile rides on the grid): sets (rx, ry). */
  private exprBackward(x: number, y: number): void {
    this.tintW = 0;
    if (this.browLift !== 0 && inBox(this.browBox, x, y)) {
      const f = this.face;
      const u = toU(f, x, y);
      const v0 = toV(f, x, y);
      let v = v0;
      for (let it = 0; it < 4; it++) v = v0 + this.browField(u, v);
      const dv = v - v0;
      x -= dv * f.ay;
      y += dv * f.ax;
    }
    for (let e = 0; e < 2; e++) {
      const st = this.eyeStates[e]!;
      const m = this.eyeList[e]!;
      if (st.on && inBox(m.box, x, y)) {
        this.eyeBackward(m, st, x, y);
        x = this.rx;
        y = this.ry;
      }
    }
    this.rx = x;
    this.ry = y;
  }

  /** Upward lift (positive = up, in pixels) of the brow layer at (u, v) in the face frame. */
  private browField(u: number, v: number): number {
    let lift = 0;
    for (let k = 0; k < this.brows.length; k++) {
      const b = this.brows[k]!;
      const span = b.u1 - b.u0;
      const hx =
        u < b.u0
          ? smoothstep(1 - (b.u0 - u) / (0.45 * span))
          : u > b.u1
            ? smoothstep(1 - (u - b.u1) / (0.45 * span))
            : 1;
      if (hx <= 0) continue;
      const vb = b.line.at(u);
      const top = vb - 1.4 * b.d;
      let hv = 0;
      if (v >= top && v <= vb) hv = smoothstep((v - top) / (vb - top));
      else if (v > vb && v < b.lid) hv = smoothstep((b.lid - v) / Math.max(b.lid - vb, 0.3 * b.d));
      lift += this.browLift * b.d * hx * hv;
    }
    return lift;
  }

  private eyeBackward(m: EyeModel, st: EyeState, x: number, y: number): void {
    const f = m.f;
    const u = toU(f, x, y);
    let v = toV(f, x, y);
    let uo = u;
    if (u > m.ua && u < m.ub) {
      const U = m.upper.at(u);
      const L = m.lower.at(u);
      const gap = L - U;
      const close = st.close;
      const U2 = U + gap * (close * 0.94 + st.squint * 0.12);
      const L2 = Math.max(U2, L - gap * (Math.max(close, 0) * 0.06 + st.squint * 0.22));
      const B = U - m.crease;
      const Lb = L + m.under;
      if (v >= B && v <= U2) {
        // The lid skin stretches down; the lash line moves down with the lid edge unstretched.
        const lash = Math.min(m.lash, 0.5 * (U2 - B));
        const e2 = U2 - lash;
        if (v >= e2) v = U - lash + (v - e2);
        else {
          const k = (e2 - B) / (U - lash - B);
          v = B + (v - B) / k;
          if (k > 1.02) {
            const fu = Math.sin((Math.PI * (u - m.ua)) / (m.ub - m.ua));
            const w = Math.min(0.6, (k - 1) * 1.2) * smoothstep((v - B) / (U - lash - B)) * fu;
            if (w > this.tintW) {
              this.tintW = w;
              this.tintR = m.skin[0];
              this.tintG = m.skin[1];
              this.tintB = m.skin[2];
            }
          }
        }
      } else if (v > U2 && v < L2) {
        if (U2 < U) v = U + ((v - U2) * (L2 - U)) / (L2 - U2); // widened: the opening stretches
        // gaze: the eye's content slides under the lids
        if (gap > 0.5 && (st.gx !== 0 || st.gy !== 0)) {
          const fu = Math.sin((Math.PI * (u - m.ua)) / (m.ub - m.ua));
          const fv = Math.sin(Math.PI * Math.min(1, Math.max(0, (v - U) / gap)));
          const k = fu * fv * 0.12 * m.width;
          // the eye frame's u runs image-left to image-right, v down
          uo = u - st.gx * k;
          v -= st.gy * k * 0.5;
        }
      } else if (v >= L2 && v <= Lb && L2 < L) {
        v = Lb + ((v - Lb) * (Lb - L)) / (Lb - L2);
      }
    }
    this.rx = f.ox + uo * f.ax - v * f.ay;
    this.ry = f.oy + uo * f.ay + v * f.ax;
  }

  /** Forward through layers 1-2 for a landmark (exact, analytic; layers 3-4 are inverted from the grid). */
  private exprForward(x: number, y: number): void {
    for (let e = 0; e < 2; e++) {
      const st = this.eyeStates[e]!;
      const m = this.eyeList[e]!;
      if (!st.on) continue;
      const f = m.f;
      const u = toU(f, x, y);
      let v = toV(f, x, y);
      if (u < m.ua || u > m.ub) continue;
      const U = m.upper.at(u);
      const L = m.lower.at(u);
      const gap = L - U;
      const U2 = U + gap * (st.close * 0.94 + st.squint * 0.12);
      const L2 = Math.max(U2, L - gap * (Math.max(st.close, 0) * 0.06 + st.squint * 0.22));
      const B = U - m.crease;
      const Lb = L + m.under;
      const eps = 1e-6;
      const lash = Math.min(m.lash, 0.5 * (U2 - B));
      if (v >= B && v <= U - lash) v = B + ((v - B) * (U2 - lash - B)) / (U - lash - B);
      else if (v > U - lash && v <= U + eps) v += U2 - U;
      else if (v >= L - eps && v <= Lb) v = Lb + ((v - Lb) * (Lb - L2)) / (Lb - L);
      else if (v > U && v < L && U2 < U) v = U2 + ((v - U) * (L2 - U2)) / (L2 - U);
      x = f.ox + u * f.ax - v * f.ay;
      y = f.oy + u * f.ay + v * f.ax;
    }
    if (this.browLift !== 0) {
      const f = this.face;
      const u = toU(f, x, y);
      const v = toV(f, x, y);
      const dv = -this.browField(u, v);
      x -= dv * f.ay;
      y += dv * f.ax;
    }
    this.rx = x;
    this.ry = y;
  }

  private moveLandmarks(p: MotionParams): Point3[] {
    const lm = this.rig.landmarks;
    const out: Point3[] = [];
    for (const q of lm) {
      this.exprForward(q.x, q.y);
      const qx = this.rx;
      const qy = this.ry;
      // Invert the grid map: find p with gridBackward(p) = q (Newton-like fixed point).
      this.headForward(qx, qy);
      let px = qx + this.rx;
      let py = qy + this.ry;
      for (let it = 0; it < 6; it++) {
        this.gridBackward(px, py);
        px += qx - this.rx;
        py += qy - this.ry;
      }
      // Depth turns with the head (for the pose of the moved rig).
      const z = this.rotatedDepth(q.x, q.y, q.z, p);
      out.push({ x: px, y: py, z });
    }
    // As a lid closes, each upper-lid landmark meets its lower-lid partner (the mesh's own
    // convention for a shut eye): slide the pairs together along the lid line. The lid line
    // itself is where the pixels put it; only the spacing of points along it changes.
    for (let e = 0; e < 2; e++) {
      const c = Math.min(1, Math.max(0, this.eyeStates[e]!.close));
      if (c <= 0) continue;
      const pairs = LID_PAIRS[e]!;
      const a = out[pairs[0]![0]]!;
      const b = out[pairs[pairs.length - 1]![0]]!;
      const ax = b.x - a.x;
      const ay = b.y - a.y;
      const n = Math.hypot(ax, ay) || 1;
      for (const [iu, il] of pairs) {
        const u = out[iu]!;
        const l = out[il]!;
        const d = ((u.x - l.x) * ax + (u.y - l.y) * ay) / n;
        const k = (c * d) / 2 / n;
        u.x -= k * ax;
        u.y -= k * ay;
        l.x += k * ax;
        l.y += k * ay;
      }
    }
    return out;
  }

  private rotatedDepth(x: number, y: number, z: number, p: MotionParams): number {
    if (p.yaw === 0 && p.pitch === 0) return z;
    const f = this.face;
    const u = toU(f, x, y);
    const v = toV(f, x, y);
    const zc = z - this.cz;
    const z1 = u * this.sy0 + zc * this.cy0;
    const vp = v - this.pitchPivotV;
    const z2 = -vp * this.sp + z1 * this.cp;
    return this.cz + z2;
  }
}

function blankEye(): EyeState {
  return { on: false, close: 0, squint: 0, gx: 0, gy: 0 };
}

/** The points' bounding box grown by `margin`, in this file's corner form. */
function boxOf(points: { x: number; y: number }[], margin: number): Box {
  const b = boundingBox(points);
  return { x0: b.x - margin, y0: b.y - margin, x1: b.x + b.width + margin, y1: b.y + b.height + margin };
}

function unionBox(boxes: Box[]): Box {
  return {
    x0: Math.min(...boxes.map((b) => b.x0)),
    y0: Math.min(...boxes.map((b) => b.y0)),
    x1: Math.max(...boxes.map((b) => b.x1)),
    y1: Math.max(...boxes.map((b) => b.y1)),
  };
}

function inBox(b: Box, x: number, y: number): boolean {
  return x >= b.x0 && x <= b.x1 && y >= b.y0 && y <= b.y1;
}

/** Lid skin colour: the middle-bright part of the band between the crease and the lashes (skips lashes, shadow, glints). */
function lidSkin(
  img: FramedPortrait,
  f: Frame2,
  ua: number,
  ub: number,
  upper: Curve,
  crease: number,
  lash: number,
): [number, number, number] {
  const px: [number, number, number, number][] = [];
  const w = ub - ua;
  for (let u = ua + 0.2 * w; u <= ub - 0.2 * w; u += 0.5) {
    const U = upper.at(u);
    for (let v = U - crease; v <= U - lash - 1; v += 0.5) {
      const x = Math.round(f.ox + u * f.ax - v * f.ay - 0.5);
      const y = Math.round(f.oy + u * f.ay + v * f.ax - 0.5);
      if (x < 0 || y < 0 || x >= img.width || y >= img.height) continue;
      const i = (y * img.width + x) * 4;
      const r = img.rgba[i]!;
      const g = img.rgba[i + 1]!;
      const b = img.rgba[i + 2]!;
      px.push([0.299 * r + 0.587 * g + 0.114 * b, r, g, b]);
    }
  }
  if (px.length === 0) return [128, 128, 128];
  px.sort((a, b) => a[0] - b[0]);
  const from = Math.floor(px.length * 0.35);
  const to = Math.max(from + 1, Math.floor(px.length * 0.75));
  const sum = [0, 0, 0];
  for (let i = from; i < to; i++) for (let c = 0; c < 3; c++) sum[c]! += px[i]![c + 1]!;
  return [sum[0]! / (to - from), sum[1]! / (to - from), sum[2]! / (to - from)];
}

/** A smooth 2D displacement field tabulated on a grid over a box; bilinear lookups, 0 outside. */
class TabulatedField {
  private readonly nx: number;
  private readonly ny: number;
  private readonly fx: Float32Array;
  private readonly fy: Float32Array;
  dx = 0;
  dy = 0;
  constructor(
    private readonly box: Box,
    private readonly step: number,
    fn: (x: number, y: number) => [number, number],
  ) {
    this.nx = Math.max(2, Math.ceil((box.x1 - box.x0) / step) + 1);
    this.ny = Math.max(2, Math.ceil((box.y1 - box.y0) / step) + 1);
    this.fx = new Float32Array(this.nx * this.ny);
    this.fy = new Float32Array(this.nx * this.ny);
    for (let j = 0; j < this.ny; j++) {
      for (let i = 0; i < this.nx; i++) {
        const [a, b] = fn(box.x0 + i * step, box.y0 + j * step);
        this.fx[j * this.nx + i] = a;
        this.fy[j * this.nx + i] = b;
      }
    }
  }
  sample(x: number, y: number): void {
    const gx = (x - this.box.x0) / this.step;
    const gy = (y - this.box.y0) / this.step;
    if (gx < 0 || gy < 0 || gx >= this.nx - 1 || gy >= this.ny - 1) {
      this.dx = 0;
      this.dy = 0;
      return;
    }
    const i0 = gx | 0;
    const j0 = gy | 0;
    const tx = gx - i0;
    const ty = gy - j0;
    const a = j0 * this.nx + i0;
    const b = a + this.nx;
    const w00 = (1 - tx) * (1 - ty);
    const w01 = tx * (1 - ty);
    const w10 = (1 - tx) * ty;
    const w11 = tx * ty;
    const fx = this.fx;
    const fy = this.fy;
    this.dx = fx[a]! * w00 + fx[a + 1]! * w01 + fx[b]! * w10 + fx[b + 1]! * w11;
    this.dy = fy[a]! * w00 + fy[a + 1]! * w01 + fy[b]! * w10 + fy[b + 1]! * w11;
  }
}
