/**
 * The I/O contract of the built-in mouth synthesis: two graphs built by
 * render/models/build/synth/build_synth.py (keep them in step).
 *
 * render/models/synth/mouth_palette.onnx, what the mouth needs of a frame's pixels, measured once
 * per frame (per prepared face: the engine keeps it):
 *   crop     uint8   [N,S,S,4]  RGBA (nearest pixel): a square crop of the frame, rotated so the mouth
 *                               corners are level (S free, DEFAULT_CROP_SIZE by default); only its size
 *                               and the pixels inside synthReadRegion are read
 *   lips     float32 [N,42,2]   SYNTH_KEYPOINTS in crop-normalised coords ([0,1] across the crop)
 *   palette  float32 [N,P]      colours (the lips, each lip's inner edge, the teeth, the cavity, the
 *                               tongue) and measures (the light's side, the portrait's own teeth and
 *                               occlusal line and the dark under it, the crease and its lower flank,
 *                               the upper lip's real edge, the photograph's blur and grain), and whatever the
 *                               synthesis graph derives from them and the key points alone (the same
 *                               for every frame of the face, so computed here once: hoist.py), in the
 *                               order the builder lays out; P is fixed by the graph pair
 *
 * render/models/synth/mouth_synth.onnx, the mouth in a shape, per frame:
 *   lips     float32 [N,42,2]   as above
 *   shape    float32 [N,6]      MOUTH_SHAPE_KEYS
 *   palette  float32 [N,P]      each item's, from the palette graph
 *   size     int64   [1]        S, the crop's edge
 *   warp     float32 [N,2,w,w]  where each pixel of the crop's middle window takes its colour from:
 *                               (du, dv) source offset in crop pixels; exactly 0 where nothing moved.
 *                               The window is the crop less a border of (S - w) / 2 = floor(S / 10)
 *   inner    float32 [N,4,h,k]  the drawn layer: r, g, b in frame levels (0..255) premultiplied by its
 *                               coverage, and the coverage (0..1), over the rows and columns that hold
 *                               every opening of the batch and its lips' margins
 *   inner_at int64   [2]        crop pixel (row, column) of inner's first pixel
 *
 * The composite (compositeWarp in image.ts) samples the full-resolution frame at each changed pixel's
 * source and lays the drawn layer over it. A graph of the first contract (one graph reading its crop
 * itself, with three shape parameters) still runs, for comparisons (render/synth/fixtures).
 */
import { LIPS_INNER, LIPS_OUTER } from '../rig/topology.ts';

/** MediaPipe Face Mesh indices of the graph's `lips` input, in order. */
export const SYNTH_KEYPOINTS: readonly number[] = Object.freeze([
  ...LIPS_INNER, // 0..19: inner lip loop: right corner, 9 upper, left corner, 9 lower
  ...LIPS_OUTER, // 20..39: outer lip loop, same order
  152, // 40: chin
  2, // 41: base of the nose
]);

export const SYNTH_KEYPOINT_COUNT = 42;

/** Indices in SYNTH_KEYPOINTS of the outer lip loop's two corners. */
const OUTER_CORNERS = [20, 30] as const;

/** Crop pixels [u0, u1) x [v0, v1): columns, then rows. */
export interface CropRegion {
  u0: number;
  u1: number;
  v0: number;
  v1: number;
}

/**
 * The crop pixels the palette graph reads, for a face's `lips` input (crop-normalised) and crop size S: its
 * colour samples (the lips, the skin below the lower lip and beside the corners, the teeth, the
 * crease, the upper lip's edge above the key points on a broad smile) and their bilinear taps all lie
 * in the box of the key points widened by a fifth of the mouth's width each side and a tenth above and
 * below, and 2 pixels. A crop need only be filled there (a test holds the graph to it).
 */
export function synthReadRegion(lips: Float32Array, S: number): CropRegion {
  let [xMin, xMax, yMin, yMax] = [Infinity, -Infinity, Infinity, -Infinity];
  for (let k = 0; k < SYNTH_KEYPOINT_COUNT; k++) {
    const x = lips[2 * k]!;
    const y = lips[2 * k + 1]!;
    [xMin, xMax, yMin, yMax] = [Math.min(xMin, x), Math.max(xMax, x), Math.min(yMin, y), Math.max(yMax, y)];
  }
  const width = Math.abs(lips[2 * OUTER_CORNERS[0]]! - lips[2 * OUTER_CORNERS[1]]!);
  const [side, above] = [0.2 * width, 0.1 * width];
  const clamp = (v: number) => Math.max(0, Math.min(S, v));
  return {
    u0: clamp(Math.floor((xMin - side) * S) - 2),
    u1: clamp(Math.ceil((xMax + side) * S) + 2),
    v0: clamp(Math.floor((yMin - above) * S) - 2),
    v1: clamp(Math.ceil((yMax + above) * S) + 2),
  };
}
export const SYNTH_INPUTS = { lips: 'lips', shape: 'shape', palette: 'palette', size: 'size' } as const;
export const PALETTE_INPUTS = { crop: 'crop', lips: 'lips' } as const;
export const PALETTE_OUTPUT = 'palette';
/** The first contract's synthesis graph read its crop itself. */
export const LEGACY_CROP_INPUT = 'crop';
export const SYNTH_OUTPUTS = { warp: 'warp', inner: 'inner', innerAt: 'inner_at' } as const;

/**
 * A mouth shape for one frame, articulatory (each 0 at rest):
 * - `open`: the lips part (quickly, over the first 0.3) and the jaw drops (from 0.15 on), so small
 *   openings show the teeth together (s, t, "ee") and 1 is a wide "ah";
 * - `wide`: corners pulled out (1, "ee") or in (-1);
 * - `round`: lips rounded and pushed forward, a small round opening ("oo", "w");
 * - `press`: lips pressed together and thinned (m, b, p);
 * - `tuck`: the lower lip under the upper teeth (f, v);
 * - `relax`: how far a smiling portrait's corners come down towards neutral (raised while talking,
 *   let fall in silence, so the smile returns).
 * The last three are optional (0 when absent), so a shape of the first contract still reads.
 */
export interface MouthShape {
  open: number;
  wide: number;
  round: number;
  press?: number;
  tuck?: number;
  relax?: number;
}

/** The graph's `shape` input, in order. */
export const MOUTH_SHAPE_KEYS = [
  'open',
  'wide',
  'round',
  'press',
  'tuck',
  'relax',
] as const satisfies readonly (keyof MouthShape)[];
