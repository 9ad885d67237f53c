/**
 * The two ONNX models of the rig (see render/models/face/MODEL_CARD.md), each
 * loaded once per process on first use and shared by every caller.
 */
import { fileURLToPath } from 'node:url';
import * as ort from '../onnx/runtime.ts';
import { loadedOnce, sessionOptions } from '../onnx/session.ts';

export const MODEL_DIR = fileURLToPath(new URL('../models/face/', import.meta.url));
export const DETECTOR_FILE = 'face_detection_short_range.onnx';
export const LANDMARK_FILE = 'face_landmark.onnx';

/** Input edge of the detector and of the landmark model (square NHWC RGB). */
export const DETECTOR_SIZE = 128;
export const LANDMARK_SIZE = 192;

export interface RigSessions {
  detector: ort.InferenceSession;
  landmarks: ort.InferenceSession;
}

// Rigging happens once per avatar or clip, off the realtime path; one thread on the CPU
// keeps it from competing with live render sessions for the machine's cores.
const SESSION_OPTIONS = sessionOptions('cpu', 1);

const sessions = loadedOnce<RigSessions>(
  async () => {
    const [detector, landmarks] = await Promise.all([
      ort.InferenceSession.create(MODEL_DIR + DETECTOR_FILE, SESSION_OPTIONS),
      ort.InferenceSession.create(MODEL_DIR + LANDMARK_FILE, SESSION_OPTIONS),
    ]);
    return { detector, landmarks };
  },
  async (s) => {
    await Promise.all([s.detector.release(), s.landmarks.release()]);
  },
);

/** Both sessions, created on first use and shared by every caller. */
export function rigSessions(): Promise<RigSessions> {
  return sessions.get();
}

export async function runModel(
  session: ort.InferenceSession,
  input: Float32Array,
  size: number,
): Promise<Record<string, Float32Array>> {
  const feeds = { image: new ort.Tensor('float32', input, [1, size, size, 3]) };
  const out = await session.run(feeds);
  const result: Record<string, Float32Array> = {};
  for (const [name, t] of Object.entries(out)) result[name] = t.data as Float32Array;
  return result;
}
