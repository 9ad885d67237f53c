/**
 * The I/O contract of the built-in mouth synthesis graph
 * (render/models/synth/mouth_synth.onnx, built by
 * render/models/build/synth/build_synth.py; keep the two in step).
 *
 *   crop  uint8   [N,S,S,4]  RGBA (nearest pixel): a square crop of the frame, rotated so the
 *                            mouth corners are level (S free, DEFAULT_CROP_SIZE by default)
 *   lips  float32 [N,42,2]   SYNTH_KEYPOINTS in crop-normalised coords ([0,1] across the crop)
 *   shape float32 [N,3]      (open 0..1, wide -1..1, round 0..1)
 *   warp     float32 [N,2,w,w]  where each pixel of the crop's middle window takes its colour from:
 *                               (du, dv) source offset in crop pixels; exactly 0 where nothing moved.
 *                               The window is the crop less a border of (S - w) / 2 = floor(S / 10)
 *   inner    float32 [N,4,h,k]  the drawn inner mouth: r, g, b in frame levels (0..255) premultiplied by
 *                               its coverage, and the coverage (0..1), over the rows and columns that
 *                               hold every opening of the batch
 *   inner_at int64   [2]        crop pixel (row, column) of inner's first pixel
 *
 * The composite (compositeWarp in image.ts) samples the full-resolution frame
 * at each changed pixel's source and lays the inner mouth over it.
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
export const DEFAULT_CROP_SIZE = 128;

export const SYNTH_INPUTS = { crop: 'crop', lips: 'lips', shape: 'shape' } as const;
export const SYNTH_OUTPUTS = { warp: 'warp', inner: 'inner', innerAt: 'inner_at' } as const;

/**
 * A mouth shape for one frame. `open`: jaw and lips apart, 0 (closed) to 1
 * (wide open "ah"); `wide`: corners pulled out (1, "ee") or in (-1);
 * `round`: lips rounded and pushed forward ("oo", "w"), 0 to 1.
 */
export interface MouthShape {
  open: number;
  wide: number;
  round: number;
}

export const NEUTRAL_SHAPE: Readonly<MouthShape> = Object.freeze({ open: 0, wide: 0, round: 0 });
