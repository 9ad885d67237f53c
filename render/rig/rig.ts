/**
 * detectFaceRig: portrait in, FaceRig out (or a RigError saying why not).
 *
 * Pipeline (MediaPipe's face mesh recipe for one still image, plus a tiled
 * detector pass and a confirmation step so multiple faces are noticed):
 *   decode -> BlazeFace on the whole image and on 4 tiles (128 px each)
 *   -> confirm each candidate with Face Mesh, pick the one face
 *   -> rotated 1.5x crop -> Face Mesh (192 px) again on a crop re-centred on the
 *      first pass's landmarks and aligned on its eye corners (tighter than the
 *      detector's keypoints) -> contours, openness, pose -> size and pose checks.
 */
import { rigFromLandmarks } from './assemble.ts';
import type { Detection } from './detector.ts';
import { decodeDetections, mergeDetections } from './detector.ts';
import { RigError } from './errors.ts';
import { boundingBox, headPose, roiFromBox } from './geometry.ts';
import type { Region, RgbImage, Roi } from './image.ts';
import { cropTensor, decodeImage, letterboxTensor, reduced, roiToImage } from './image.ts';
import { DETECTOR_SIZE, LANDMARK_SIZE, rigSessions, runModel } from './models.ts';
import { LANDMARK_COUNT, LEFT_EYE_CORNERS, RIGHT_EYE_CORNERS } from './topology.ts';
import type { FaceRig, Point3 } from './types.ts';

/** Limits a caller may tighten or relax (e.g. clip pose checks vs avatar creation). */
export interface RigLimits {
  /**
   * Smallest face (longest side of the landmark box, forehead to chin) in
   * pixels. Under ~80 px the mouth is under ~30 px wide: too few pixels to
   * place lip contours or to warp lips credibly, and the face would be
   * upscaled ~1.6x to fill the landmark model's input (Face Mesh sees the face
   * at ~128 of its 192 px). Lip-sync models of the Wav2Lip class take 96 px
   * crops, so 80 still upscales only a little.
   */
  minFaceSizePx: number;
  /**
   * A 2D warp of a single photo cannot show the far side of the face; past
   * ~30 degrees of yaw one cheek and eye are foreshortened enough that mouth
   * and blink warps visibly smear, and the mesh itself is less accurate.
   */
  maxYawDeg: number;
  /** Looking far up or down hides the lips or the eyes (lids, brows) the rig animates. */
  maxPitchDeg: number;
  /**
   * Roll is harmless to the mesh (crops are rotated) but a strongly tilted
   * head is rarely an intended portrait, and the talking-head loops assume
   * roughly upright.
   */
  maxRollDeg: number;
}

export const DEFAULT_RIG_LIMITS: Readonly<RigLimits> = Object.freeze({
  minFaceSizePx: 80,
  maxYawDeg: 30,
  maxPitchDeg: 25,
  maxRollDeg: 30,
});

/**
 * Another face counts as a rival (multiple_faces) when it is at least this
 * fraction of the main face's width. Smaller ones (a framed photo in the
 * background, a distant passer-by) do not stop us rigging the main face.
 */
const RIVAL_FACE_RATIO = 0.5;

/**
 * Face Mesh's presence probability below which a detection is judged not a
 * face. Stricter than MediaPipe's 0.5 tracking threshold: real faces in the
 * fixtures score above 0.99 (even the cameraman in near profile), while a
 * space helmet the detector took for a face scored 0.41.
 */
export const MIN_PRESENCE = 0.75;

export interface RigOptions {
  limits?: Partial<RigLimits>;
}

/**
 * Find the one face in a portrait and return its rig, in image pixels.
 * @param image encoded image bytes (JPEG, PNG, WebP, AVIF, GIF, TIFF...) or a file path
 * @throws RigError with code invalid_image | no_face | multiple_faces | face_too_small | extreme_pose
 */
export async function detectFaceRig(image: Buffer | string, options: RigOptions = {}): Promise<FaceRig> {
  return rigOfImage(await decodeImage(image), options);
}

/** detectFaceRig on an already decoded image (video frames: no encode and decode per frame). */
async function rigOfImage(img: RgbImage, options: RigOptions = {}): Promise<FaceRig> {
  const limits: RigLimits = { ...DEFAULT_RIG_LIMITS, ...options.limits };
  const { face, fit: first } = await findMainFace(img);
  const fit = await fitLandmarks(img, roiFromLandmarks(first.points));
  if (fit.presence < MIN_PRESENCE) {
    throw new RigError(
      'no_face',
      'No clear face was found in the image. Use a photo where one face is clearly visible.',
      {
        presence: round(fit.presence, 3),
      },
    );
  }

  const lm = fit.points;
  const problem = landmarkProblem(lm, limits);
  if (problem) throw problem;

  return rigFromLandmarks(
    lm,
    { width: img.width, height: img.height },
    { box: face.box, score: face.score },
    fit.presence,
  );
}

/**
 * The short-range detector reliably finds faces down to roughly 1/7 of the
 * frame. To also see the smaller faces of a two-person or group shot (so we
 * can say multiple_faces instead of silently picking one), it runs again on
 * four overlapping tiles, each this fraction of the image's width and height
 * (1.67x zoom). Five runs of a 128-px model cost a few milliseconds.
 */
const TILE_FRACTION = 0.6;
/** A tile detection this close (fraction of the tile) to an edge shared with the rest of the image is a cut face. */
const TILE_EDGE_MARGIN = 0.02;

async function detectFaces(img: RgbImage): Promise<Detection[]> {
  const { detector } = await rigSessions();
  // All five passes read from one small copy: a tile needs DETECTOR_SIZE
  // pixels across, so the image needs DETECTOR_SIZE / TILE_FRACTION; more
  // would only be thrown away by the resize to DETECTOR_SIZE.
  const factor = Math.floor(Math.max(img.width, img.height) / (DETECTOR_SIZE / TILE_FRACTION));
  const src = factor >= 2 ? await reduced(img, factor) : img;
  const sx = img.width / src.width;
  const sy = img.height / src.height;
  const whole: Region = { left: 0, top: 0, width: src.width, height: src.height };
  const tw = Math.round(src.width * TILE_FRACTION);
  const th = Math.round(src.height * TILE_FRACTION);
  const tiles: Region[] = [];
  for (const left of [0, src.width - tw]) {
    for (const top of [0, src.height - th]) tiles.push({ left, top, width: tw, height: th });
  }
  const found: Detection[] = [];
  for (const region of [whole, ...tiles]) {
    const { tensor, box } = await letterboxTensor(src, DETECTOR_SIZE, -1, 1, region);
    const out = await runModel(detector, tensor, DETECTOR_SIZE);
    for (const d of decodeDetections(out.regressors!, out.scores!, box)) {
      if (region === whole || !cutByTile(d, region, src)) found.push(scaleDetection(d, sx, sy));
    }
  }
  return mergeDetections(found);
}

function scaleDetection(d: Detection, sx: number, sy: number): Detection {
  if (sx === 1 && sy === 1) return d;
  return {
    box: { x: d.box.x * sx, y: d.box.y * sy, width: d.box.width * sx, height: d.box.height * sy },
    keypoints: d.keypoints.map((k) => ({ x: k.x * sx, y: k.y * sy })),
    score: d.score,
  };
}

function cutByTile(d: Detection, tile: Region, img: RgbImage): boolean {
  const mx = TILE_EDGE_MARGIN * tile.width;
  const my = TILE_EDGE_MARGIN * tile.height;
  const { x, y, width, height } = d.box;
  return (
    (tile.left > 0 && x < tile.left + mx) ||
    (tile.top > 0 && y < tile.top + my) ||
    (tile.left + tile.width < img.width && x + width > tile.left + tile.width - mx) ||
    (tile.top + tile.height < img.height && y + height > tile.top + tile.height - my)
  );
}

/**
 * Pick the face to rig. Each detection, largest first, is confirmed by a Face
 * Mesh pass (its presence score), which weeds out the detector's false
 * positives (helmets, patterns) before they can be the main face or a rival.
 * Detections too small to be rivals of the main face are not looked at.
 */
export async function findMainFace(img: RgbImage): Promise<{ face: Detection; fit: LandmarkFit }> {
  const faces = await detectFaces(img);
  faces.sort((a, b) => b.box.width * b.box.height - a.box.width * a.box.height);
  const confirmed: { face: Detection; fit: LandmarkFit }[] = [];
  for (const face of faces) {
    const main = confirmed[0];
    if (main && face.box.width < RIVAL_FACE_RATIO * main.face.box.width) break; // the rest are smaller still
    const fit = await fitLandmarks(img, roiFromBox(face.box, face.keypoints[0]!, face.keypoints[1]!));
    if (fit.presence >= MIN_PRESENCE) confirmed.push({ face, fit });
  }
  if (confirmed.length === 0) {
    throw new RigError('no_face', 'No face was found in the image. Use a photo where one face is clearly visible.', {
      candidates: faces.length,
    });
  }
  if (confirmed.length > 1) {
    throw new RigError(
      'multiple_faces',
      `Found ${confirmed.length} faces in the image. Use a photo of just one person, or crop it to one face.`,
      { faces: confirmed.length },
    );
  }
  return confirmed[0]!;
}

export interface LandmarkFit {
  points: Point3[];
  presence: number;
}

export async function fitLandmarks(img: RgbImage, roi: Roi): Promise<LandmarkFit> {
  const { landmarks } = await rigSessions();
  const tensor = await cropTensor(img, roi, LANDMARK_SIZE);
  const out = await runModel(landmarks, tensor, LANDMARK_SIZE);
  const raw = out.landmarks!;
  const points: Point3[] = [];
  for (let i = 0; i < LANDMARK_COUNT; i++) {
    const p = roiToImage(roi, raw[i * 3]! / LANDMARK_SIZE, raw[i * 3 + 1]! / LANDMARK_SIZE);
    points.push({ x: p.x, y: p.y, z: (raw[i * 3 + 2]! / LANDMARK_SIZE) * roi.size });
  }
  const presence = 1 / (1 + Math.exp(-out.face_flag![0]!));
  return { points, presence };
}

/**
 * Why a fitted face cannot be animated under `limits` (too small, or an extreme pose), as the
 * RigError a portrait gets; undefined when it can.
 */
export function landmarkProblem(lm: readonly Point3[], limits: RigLimits): RigError | undefined {
  const box = boundingBox(lm);
  const faceSize = Math.max(box.width, box.height);
  if (faceSize < limits.minFaceSizePx) {
    return new RigError(
      'face_too_small',
      `The face is only about ${Math.round(faceSize)} pixels across; it needs at least ${limits.minFaceSizePx}. ` +
        'Use a larger photo, or one taken closer to the face.',
      { faceSizePx: Math.round(faceSize), minFaceSizePx: limits.minFaceSizePx },
    );
  }
  const pose = headPose(lm);
  const checks = [
    ['yaw', pose.yaw, limits.maxYawDeg, 'turned to the side'],
    ['pitch', pose.pitch, limits.maxPitchDeg, pose.pitch > 0 ? 'tilted up' : 'tilted down'],
    ['roll', pose.roll, limits.maxRollDeg, 'tilted sideways'],
  ] as const;
  for (const [axis, value, max, what] of checks) {
    if (Math.abs(value) > max) {
      return new RigError(
        'extreme_pose',
        `The head is ${what} by about ${Math.round(Math.abs(value))} degrees (at most ${max} allowed). ` +
          'Use a photo where the person looks roughly into the camera.',
        { axis, degrees: round(value, 1), maxDegrees: max },
      );
    }
  }
  return undefined;
}

/** The landmark model's crop for a face whose landmarks are known (a refit, or the next frame of a video). */
export function roiFromLandmarks(points: readonly Point3[]): Roi {
  return roiFromBox(boundingBox(points), points[RIGHT_EYE_CORNERS.outer]!, points[LEFT_EYE_CORNERS.outer]!);
}

function round(v: number, digits: number): number {
  const k = 10 ** digits;
  return Math.round(v * k) / k;
}
