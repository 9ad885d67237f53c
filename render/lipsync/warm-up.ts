/**
 * An engine's first runs, before it serves anyone: an onnxruntime session's first runs cost
 * several times a later one (100 ms against 30 for two mouths here, then about 1.7 times a later
 * one for the first crop of another size), and on a live worker they fell on its first call's
 * first seconds. The face is a real one, stored (warm-up-face.json: the rig of the Grace Hopper
 * test portrait, render/rig/fixtures, public domain), so no model has to run to get it.
 */
import { readFileSync } from 'node:fs';
import { rigFromLandmarks } from '../rig/assemble.ts';
import type { FaceRig, Point3 } from '../rig/types.ts';
import { AUTO_CROP_SIZES } from '../synth/prepare.ts';
import { prepareLipSyncFace, type LipSyncEngine, type LipSyncFace, type LipSyncI420Item } from './engine.ts';
import { frameAudioSpan } from './mel.ts';

/** The stored face: a portrait's size, its detection and its 468 landmarks (x, y, z flattened, 0.1 px). */
export interface StoredFace {
  source: string;
  imageSize: { width: number; height: number };
  detection: FaceRig['detection'];
  presence: number;
  landmarks: number[];
}

export const WARM_UP_FACE_FILE = new URL('./warm-up-face.json', import.meta.url);

/** The rig of the stored face, on a frame of its portrait's size rounded up to even sides (I420's). */
export function warmUpRig(): FaceRig {
  const face = JSON.parse(readFileSync(WARM_UP_FACE_FILE, 'utf8')) as StoredFace;
  const points: Point3[] = [];
  for (let i = 0; i + 2 < face.landmarks.length; i += 3)
    points.push({ x: face.landmarks[i]!, y: face.landmarks[i + 1]!, z: face.landmarks[i + 2]! });
  const { width, height } = face.imageSize;
  return rigFromLandmarks(
    points,
    { width: width + (width % 2), height: height + (height % 2) },
    face.detection,
    face.presence,
  );
}

/**
 * Runs `engine` `runs` times on batches of `batch` mouths (a pool shares a batch among its
 * threads, so one of 8 reaches every thread), on a grey frame holding the stored face: the
 * built-in engine draws shapes from closed to wide open, a neural model hears a voice-like buzz.
 * The built-in engine then draws the same face once more at every crop size its faces can take
 * (`sizeSpread` items each, to reach every thread): a call's face is cropped at the size its own
 * face needs, and the graph's first run at a size not seen before took 35 ms in a traced call
 * against 4-12 for the next ones (a busy 2-core machine).
 */
export async function warmUpLipSync(
  engine: Pick<LipSyncEngine, 'kind' | 'prepare' | 'renderI420' | 'needsAudio'>,
  { batch = 8, runs = 2, sizeSpread = 4 }: { batch?: number; runs?: number; sizeSpread?: number } = {},
): Promise<void> {
  const rig = warmUpRig();
  const { width, height } = rig.imageSize;
  const face = engine.prepare(rig);
  const size = width * height * 1.5;
  const fps = 25;
  const sampleRate = 24_000;
  const item = (face: LipSyncFace, open: number, frame: number): LipSyncI420Item => {
    const i420 = new Uint8Array(new SharedArrayBuffer(size)).fill(128);
    const it: LipSyncI420Item = { i420, width, height, face, shape: { open, wide: 0.3, round: 0.2 } };
    if (engine.needsAudio) it.audio = buzz(frame, fps, sampleRate);
    return it;
  };
  for (let run = 0; run < runs; run++)
    await engine.renderI420(
      Array.from({ length: batch }, (_, k) => item(face, (k + 1) / (batch + 1), run * batch + k)),
    );
  if (engine.kind !== 'builtin') return;
  const sized = AUTO_CROP_SIZES.flatMap((cropSize) => {
    const at = prepareLipSyncFace('builtin', rig, cropSize);
    return Array.from({ length: sizeSpread }, () => item(at, 0.5, 0));
  });
  await engine.renderI420(sized);
}

function buzz(frame: number, fps: number, sampleRate: number): NonNullable<LipSyncI420Item['audio']> {
  const { start, length } = frameAudioSpan(frame, fps, sampleRate);
  return { pcm: voiceLikeBuzz(start, length, sampleRate), sampleRate, frame, fps };
}

/** A voice-like buzz (140 Hz, its loudness swelling 4 times a second): `length` samples from sample `start` on. */
export function voiceLikeBuzz(start: number, length: number, sampleRate: number): Int16Array {
  const pcm = new Int16Array(length);
  for (let i = 0; i < length; i++) {
    const t = (start + i) / sampleRate;
    pcm[i] = Math.round(6000 * Math.sin(2 * Math.PI * 140 * t) * (1 + Math.sin(2 * Math.PI * 4 * t)));
  }
  return pcm;
}
