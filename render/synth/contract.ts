/**
 * The I/O contract of the built-in mouth synthesis graph
 * (render/models/synth/mouth_synth.onnx, built by
 * render/models/build/synth/build_synth.py; keep the two in step).
 *
 *   crop  float32 [N,3,S,S]  RGB in [0,1]: a square crop of the frame, rotated so the
 *                            mouth corners are level (S free, DEFAULT_CROP_SIZE by default)
 *   lips  float32 [N,42,2]   SYNTH_KEYPOINTS in crop-normalised coords ([0,1] across the crop)
 *   shape float32 [N,3]      (open 0..1, wide -1..1, round 0..1)
 *   out   float32 [N,3,S,S]  the crop with the mouth re-shaped
 *   mask  float32 [N,1,S,S]  0 where out equals crop, up to 1 where it changed
 *   keep  float32 [N,1,S,S]  how much of the frame's own fine detail to keep where it changed:
 *                            1 where the skin moved under half a pixel, 0 where it moved 2+ px
 *                            or the inner mouth was drawn (see compositeFromTensor)
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
export const SYNTH_OUTPUTS = { out: 'out', mask: 'mask', keep: 'keep' } as const;

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
