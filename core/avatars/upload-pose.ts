/**
 * Pose validation of uploaded clip videos (a person may still accept a pose refusal: POST
 * /avatars/{id}/clips/review; the video must fit the 18 MB quality-check ceiling): an
 * uploaded clip must start, play and end on the avatar's anchor pose, so a few of its frames (the
 * first, the middle and the last) go through the face rig and their head pose and face size are
 * compared with the avatar portrait's. The verdict is stored as-is in `avatar_clips.pose_check`.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { detectFaceRig, isRigError } from '../../render/rig/index.ts';
import type { FaceRig } from '../../render/rig/index.ts';
import { resolveFfmpegPath } from '../../render/encode/mp4.ts';

const run = promisify(execFile);

/** The quality-check ceiling of a clip upload, as the public API documents it: 18 MB. */
export const UPLOAD_CLIP_MAX_BYTES = 18_000_000;

/**
 * How far a frame may be from the anchor (the portrait's rig pose). Degrees for the angles; the
 * face size is the rig box's width over the frame's width, compared as a ratio to the anchor's.
 */
const POSE_TOLERANCE = {
  yawDeg: 15,
  pitchDeg: 15,
  rollDeg: 10,
  faceSizeRatioMin: 0.5,
  faceSizeRatioMax: 2,
} as const;

/** Frames sampled per second of video before first, middle and last are picked (at most FRAME_CAP of them). */
const SAMPLE_FPS = 2;
const FRAME_CAP = 240;

interface FramePose {
  /** Which frame: first, middle or last. */
  at: 'first' | 'middle' | 'last';
  yawDeg: number;
  pitchDeg: number;
  rollDeg: number;
  /** Face box width over frame width. */
  faceSize: number;
}

export interface AnchorPose {
  yawDeg: number;
  pitchDeg: number;
  rollDeg: number;
  faceSize: number;
}

export type UploadPoseCheck =
  | {
      verdict: 'accepted';
      anchor: AnchorPose;
      frames: FramePose[];
      tolerance: typeof POSE_TOLERANCE;
      checkedAt: string;
    }
  | {
      verdict: 'pose_mismatch';
      message: string;
      anchor: AnchorPose;
      frames: FramePose[];
      tolerance: typeof POSE_TOLERANCE;
      checkedAt: string;
    }
  | { verdict: 'refused'; code: string; message: string; frames: { at: string; code?: string }[]; checkedAt: string };

const round = (v: number) => Math.round(v * 1000) / 1000;

function poseOf(rig: FaceRig, width: number): AnchorPose {
  return {
    yawDeg: round(rig.pose.yaw),
    pitchDeg: round(rig.pose.pitch),
    rollDeg: round(rig.pose.roll),
    faceSize: round(rig.box.width / width),
  };
}

async function imageWidth(bytes: Buffer): Promise<number> {
  const m = await sharp(bytes).metadata();
  return m.width ?? 1;
}

/** The anchor pose of a portrait; throws the rig's RigError when the portrait has no usable face. */
export async function anchorPose(portrait: Buffer): Promise<AnchorPose> {
  const rig = await detectFaceRig(portrait);
  return poseOf(rig, await imageWidth(portrait));
}

/** The first, middle and last frames of a video as PNG bytes (fewer when the video is short); [] when ffmpeg reads none. */
async function sampleFrames(video: Buffer): Promise<{ at: FramePose['at']; png: Buffer }[]> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'clip-pose-'));
  try {
    const input = path.join(work, 'in.mp4');
    await writeFile(input, video);
    try {
      await run(
        resolveFfmpegPath(),
        [
          '-v',
          'error',
          '-nostdin',
          '-i',
          input,
          '-vf',
          `fps=${SAMPLE_FPS}`,
          '-frames:v',
          String(FRAME_CAP),
          path.join(work, 'f%04d.png'),
        ],
        {
          timeout: 60_000,
        },
      );
    } catch {
      // Not a video ffmpeg can decode: whatever frames it wrote (likely none) decide.
    }
    const files = (await readdir(work)).filter((f) => f.endsWith('.png')).sort();
    if (files.length === 0) return [];
    const picks: { at: FramePose['at']; i: number }[] = [
      { at: 'first', i: 0 },
      { at: 'middle', i: Math.floor((files.length - 1) / 2) },
      { at: 'last', i: files.length - 1 },
    ];
    const out: { at: FramePose['at']; png: Buffer }[] = [];
    for (const p of picks) out.push({ at: p.at, png: await readFile(path.join(work, files[p.i]!)) });
    return out;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The verdict of an uploaded clip against its avatar's anchor. */
export async function checkUploadedClip(video: Buffer, anchor: AnchorPose): Promise<UploadPoseCheck> {
  const checkedAt = new Date().toISOString();
  if (video.length > UPLOAD_CLIP_MAX_BYTES) {
    return {
      verdict: 'refused',
      code: 'too_large',
      message: `The video is ${video.length} bytes, over the ${UPLOAD_CLIP_MAX_BYTES}-byte quality-check ceiling`,
      frames: [],
      checkedAt,
    };
  }
  const sampled = await sampleFrames(video);
  if (sampled.length === 0) {
    return {
      verdict: 'refused',
      code: 'invalid_media',
      message: 'No video frame could be decoded from the upload',
      frames: [],
      checkedAt,
    };
  }
  const frames: FramePose[] = [];
  for (const f of sampled) {
    try {
      const rig = await detectFaceRig(f.png);
      frames.push({ at: f.at, ...poseOf(rig, await imageWidth(f.png)) });
    } catch (err) {
      if (!isRigError(err)) throw err;
      return {
        verdict: 'refused',
        code: err.code,
        message: `The ${f.at} frame was refused by the face rig: ${err.message}`,
        frames: [...frames.map((p) => ({ at: p.at })), { at: f.at, code: err.code }],
        checkedAt,
      };
    }
  }
  const off: string[] = [];
  for (const f of frames) {
    const ratio = f.faceSize / Math.max(anchor.faceSize, 1e-6);
    if (Math.abs(f.yawDeg - anchor.yawDeg) > POSE_TOLERANCE.yawDeg) off.push(`${f.at} frame yaw`);
    if (Math.abs(f.pitchDeg - anchor.pitchDeg) > POSE_TOLERANCE.pitchDeg) off.push(`${f.at} frame pitch`);
    if (Math.abs(f.rollDeg - anchor.rollDeg) > POSE_TOLERANCE.rollDeg) off.push(`${f.at} frame roll`);
    if (ratio < POSE_TOLERANCE.faceSizeRatioMin || ratio > POSE_TOLERANCE.faceSizeRatioMax)
      off.push(`${f.at} frame face size`);
  }
  if (off.length > 0) {
    return {
      verdict: 'pose_mismatch',
      message: `The clip does not hold the avatar's anchor pose (${off.join(', ')} out of tolerance)`,
      anchor,
      frames,
      tolerance: POSE_TOLERANCE,
      checkedAt,
    };
  }
  return { verdict: 'accepted', anchor, frames, tolerance: POSE_TOLERANCE, checkedAt };
}
