/**
 * BlazeFace short-range post-processing: SSD anchors, box/keypoint decoding
 * and weighted non-max suppression, with MediaPipe's parameters for this model
 * (face_detection_short_range.pbtxt), so the ONNX graph behaves as upstream.
 */
import type { Letterbox } from './image.ts';
import type { Box, Point } from './types.ts';

export interface Detection {
  /** Image pixels. */
  box: Box;
  /** right eye, left eye, nose tip, mouth centre, right ear, left ear (subject's sides), image pixels. */
  keypoints: Point[];
  score: number;
}

interface Anchor {
  cx: number;
  cy: number;
}

const NUM_KEYPOINTS = 6;
const NUM_COORDS = 4 + NUM_KEYPOINTS * 2;
/** Raw offsets are in detector-input pixels. */
const COORD_SCALE = 128;
/** Logits beyond this are clipped before the sigmoid, as upstream does. */
const SCORE_CLIP = 100;
/** MediaPipe's default minimum score for this detector. */
const MIN_DETECTION_SCORE = 0.5;
/** Boxes overlapping more than this (IoU) are the same face; upstream's value. */
const NMS_IOU = 0.3;

/**
 * SsdAnchorsCalculator with num_layers 4, strides [8, 16, 16, 16], one aspect
 * ratio plus one interpolated scale, fixed anchor size: 16x16x2 + 8x8x6 = 896
 * anchor centres in [0, 1]. Consecutive layers with the same stride share a grid.
 */
export function makeAnchors(inputSize = 128): Anchor[] {
  const strides = [8, 16, 16, 16];
  const anchors: Anchor[] = [];
  let layer = 0;
  while (layer < strides.length) {
    const stride = strides[layer]!;
    let perCell = 0;
    while (layer < strides.length && strides[layer] === stride) {
      perCell += 2;
      layer++;
    }
    const grid = Math.ceil(inputSize / stride);
    for (let y = 0; y < grid; y++) {
      for (let x = 0; x < grid; x++) {
        for (let a = 0; a < perCell; a++) anchors.push({ cx: (x + 0.5) / grid, cy: (y + 0.5) / grid });
      }
    }
  }
  return anchors;
}

const ANCHORS = makeAnchors();

/** Decode raw model outputs into detections in image pixels, suppressed and sorted by score. */
export function decodeDetections(
  regressors: Float32Array,
  scores: Float32Array,
  letterbox: Letterbox,
  minScore = MIN_DETECTION_SCORE,
): Detection[] {
  const toImage = (u: number, v: number): Point => ({
    x: letterbox.offsetX + (u * COORD_SCALE - letterbox.padX) / letterbox.scaleX,
    y: letterbox.offsetY + (v * COORD_SCALE - letterbox.padY) / letterbox.scaleY,
  });
  const found: Detection[] = [];
  for (let i = 0; i < ANCHORS.length; i++) {
    const logit = Math.min(Math.max(scores[i]!, -SCORE_CLIP), SCORE_CLIP);
    const score = 1 / (1 + Math.exp(-logit));
    if (score < minScore) continue;
    const a = ANCHORS[i]!;
    const r = i * NUM_COORDS;
    const cx = regressors[r]! / COORD_SCALE + a.cx;
    const cy = regressors[r + 1]! / COORD_SCALE + a.cy;
    const w = regressors[r + 2]! / COORD_SCALE;
    const h = regressors[r + 3]! / COORD_SCALE;
    const tl = toImage(cx - w / 2, cy - h / 2);
    const br = toImage(cx + w / 2, cy + h / 2);
    const keypoints: Point[] = [];
    for (let k = 0; k < NUM_KEYPOINTS; k++) {
      keypoints.push(
        toImage(regressors[r + 4 + k * 2]! / COORD_SCALE + a.cx, regressors[r + 5 + k * 2]! / COORD_SCALE + a.cy),
      );
    }
    found.push({ box: { x: tl.x, y: tl.y, width: br.x - tl.x, height: br.y - tl.y }, keypoints, score });
  }
  return weightedNms(found);
}

/**
 * Merge detections from several passes (whole image, tiles) that are in
 * image pixels: weighted NMS, then drop any detection of similar size whose
 * centre lies inside a better one's box. A zoomed tile often finds the same
 * face with a box just different enough to escape NMS; two real faces do
 * not overlap like that. (Similar size only, so a large false box cannot
 * swallow a real face.)
 */
export function mergeDetections(all: Detection[]): Detection[] {
  const kept: Detection[] = [];
  for (const d of weightedNms(all)) {
    const cx = d.box.x + d.box.width / 2;
    const cy = d.box.y + d.box.height / 2;
    const dup = kept.some(
      (k) =>
        cx >= k.box.x &&
        cx <= k.box.x + k.box.width &&
        cy >= k.box.y &&
        cy <= k.box.y + k.box.height &&
        d.box.width > 0.5 * k.box.width &&
        d.box.width < 2 * k.box.width,
    );
    if (!dup) kept.push(d);
  }
  return kept;
}

export function iou(a: Box, b: Box): number {
  const x0 = Math.max(a.x, b.x);
  const y0 = Math.max(a.y, b.y);
  const x1 = Math.min(a.x + a.width, b.x + b.width);
  const y1 = Math.min(a.y + a.height, b.y + b.height);
  const inter = Math.max(0, x1 - x0) * Math.max(0, y1 - y0);
  const union = a.width * a.height + b.width * b.height - inter;
  return union > 0 ? inter / union : 0;
}

/**
 * MediaPipe's WEIGHTED NMS: each cluster of overlapping candidates becomes one
 * detection whose box and keypoints are the score-weighted mean of the
 * cluster, with the best candidate's score. Steadier than plain NMS.
 */
function weightedNms(candidates: Detection[]): Detection[] {
  let rest = [...candidates].sort((p, q) => q.score - p.score);
  const out: Detection[] = [];
  while (rest.length > 0) {
    const top = rest[0]!;
    // top overlaps itself fully, so the cluster is never empty
    const cluster = rest.filter((d) => iou(top.box, d.box) > NMS_IOU);
    rest = rest.filter((d) => iou(top.box, d.box) <= NMS_IOU);
    let total = 0;
    const box = { x: 0, y: 0, width: 0, height: 0 };
    const kps = top.keypoints.map(() => ({ x: 0, y: 0 }));
    for (const d of cluster) {
      total += d.score;
      box.x += d.box.x * d.score;
      box.y += d.box.y * d.score;
      box.width += d.box.width * d.score;
      box.height += d.box.height * d.score;
      d.keypoints.forEach((k, j) => {
        kps[j]!.x += k.x * d.score;
        kps[j]!.y += k.y * d.score;
      });
    }
    out.push({
      box: { x: box.x / total, y: box.y / total, width: box.width / total, height: box.height / total },
      keypoints: kps.map((k) => ({ x: k.x / total, y: k.y / total })),
      score: top.score,
    });
  }
  return out;
}
