import { describe, expect, it } from 'vitest';
import type { Detection } from './detector.ts';
import { decodeDetections, iou, makeAnchors, mergeDetections } from './detector.ts';

const NO_LETTERBOX = { offsetX: 0, offsetY: 0, scaleX: 1, scaleY: 1, padX: 0, padY: 0 };

function det(x: number, y: number, size: number, score: number): Detection {
  return { box: { x, y, width: size, height: size }, keypoints: [{ x: x + size / 2, y: y + size / 2 }], score };
}

describe('BlazeFace anchors', () => {
  it('match the model output: 16x16x2 then 8x8x6 centres', () => {
    const anchors = makeAnchors();
    expect(anchors).toHaveLength(896);
    expect(anchors[0]).toEqual({ cx: 0.5 / 16, cy: 0.5 / 16 });
    expect(anchors[1]).toEqual(anchors[0]); // two anchors per cell at stride 8
    expect(anchors[511]).toEqual({ cx: 15.5 / 16, cy: 15.5 / 16 });
    expect(anchors[512]).toEqual({ cx: 0.5 / 8, cy: 0.5 / 8 });
    expect(anchors[895]).toEqual({ cx: 7.5 / 8, cy: 7.5 / 8 });
  });
});

describe('decodeDetections', () => {
  it('decodes offsets relative to the anchor and maps through the letterbox', () => {
    const regressors = new Float32Array(896 * 16);
    const scores = new Float32Array(896).fill(-20); // sigmoid ~ 0
    const i = 600; // a stride-16 anchor
    const a = makeAnchors()[i]!;
    scores[i] = 3; // sigmoid 0.95
    regressors.set([6.4, -3.2, 32, 40], i * 16); // centre +0.05/-0.025, size 0.25 x 0.3125 of the input
    regressors.set([-12.8, 0], i * 16 + 4); // first keypoint 0.1 left of the anchor
    // Letterbox: image 400x200 fitted into 128x128 -> scale 0.32, 32 px bars top and bottom.
    const lb = { offsetX: 10, offsetY: 20, scaleX: 0.32, scaleY: 0.32, padX: 0, padY: 32 };
    const [d] = decodeDetections(regressors, scores, lb);
    expect(d!.score).toBeCloseTo(1 / (1 + Math.exp(-3)), 6);
    const cx = (a.cx + 0.05) * 128;
    const cy = (a.cy - 0.025) * 128;
    expect(d!.box.x).toBeCloseTo(10 + (cx - 16) / 0.32, 3);
    expect(d!.box.y).toBeCloseTo(20 + (cy - 20 - 32) / 0.32, 3);
    expect(d!.box.width).toBeCloseTo(32 / 0.32, 3);
    expect(d!.box.height).toBeCloseTo(40 / 0.32, 3);
    expect(d!.keypoints[0]!.x).toBeCloseTo(10 + ((a.cx - 0.1) * 128) / 0.32, 3);
    expect(d!.keypoints).toHaveLength(6);
  });

  it('finds nothing when every score is low', () => {
    expect(decodeDetections(new Float32Array(896 * 16), new Float32Array(896).fill(-1), NO_LETTERBOX)).toEqual([]);
  });
});

describe('merging detections', () => {
  it('computes IoU', () => {
    expect(iou({ x: 0, y: 0, width: 10, height: 10 }, { x: 0, y: 0, width: 10, height: 10 })).toBe(1);
    expect(iou({ x: 0, y: 0, width: 10, height: 10 }, { x: 5, y: 0, width: 10, height: 10 })).toBeCloseTo(50 / 150);
    expect(iou({ x: 0, y: 0, width: 10, height: 10 }, { x: 20, y: 0, width: 10, height: 10 })).toBe(0);
  });

  it('averages overlapping boxes by score and keeps separate faces apart', () => {
    const out = mergeDetections([det(0, 0, 100, 0.9), det(10, 0, 100, 0.3), det(300, 0, 100, 0.8)]);
    expect(out).toHaveLength(2);
    expect(out[0]!.score).toBe(0.9);
    expect(out[0]!.box.x).toBeCloseTo((0 * 0.9 + 10 * 0.3) / 1.2);
    expect(out[1]!.box.x).toBe(300);
  });

  it('drops a same-size box centred inside a better one, but not a small face inside a big box', () => {
    // IoU of these two is under the NMS threshold, yet they are one face seen twice.
    expect(mergeDetections([det(0, 0, 100, 0.9), det(45, 45, 80, 0.6)])).toHaveLength(1);
    expect(mergeDetections([det(0, 0, 300, 0.9), det(120, 120, 40, 0.8)])).toHaveLength(2);
  });
});
