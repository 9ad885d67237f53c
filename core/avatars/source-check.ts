import { detectFaceRig, isRigError } from '../../render/rig/index.ts';
import type { Sql, Tx } from '../platform/db/index.ts';
import type { AvatarRow } from './types.ts';

/**
 * The automated source checks of a portrait: the face rig (one face, big enough, a pose a 2D rig
 * can animate). The verdict is stored as-is in avatar_source_reviews.machine_verdict.
 */
export interface SourceVerdict {
  passed: boolean;
  /** `ok`, or the rig's refusal code (no_face, multiple_faces, face_too_small, extreme_pose, invalid_image). */
  code: string;
  message: string;
  details: Record<string, number | string>;
  checkedAt: string;
}

export async function checkSource(bytes: Buffer): Promise<SourceVerdict> {
  const checkedAt = new Date().toISOString();
  try {
    const rig = await detectFaceRig(bytes);
    return {
      passed: true,
      code: 'ok',
      message: 'One face, large enough, in a pose the rig can animate',
      details: {
        detectionScore: round(rig.detection.score),
        presence: round(rig.presence),
        yawDeg: round(rig.pose.yaw),
        pitchDeg: round(rig.pose.pitch),
        rollDeg: round(rig.pose.roll),
      },
      checkedAt,
    };
  } catch (err) {
    if (!isRigError(err)) throw err;
    return { passed: false, code: err.code, message: err.message, details: { ...err.details }, checkedAt };
  }
}

const round = (v: number) => Math.round(v * 1000) / 1000;

/**
 * Whether the avatar's current portrait was accepted by a person's review (PATCH with
 * sourceReview): its loop and clips then render with the rig's relaxed limits.
 */
export async function sourceReviewed(q: Sql | Tx, row: Pick<AvatarRow, 'id' | 'source_asset_id'>): Promise<boolean> {
  if (!row.source_asset_id) return false;
  const [r] = await q<{ review_reason: string | null }[]>`
    select review_reason from avatar_source_reviews where avatar_id = ${row.id} and asset_id = ${row.source_asset_id} and accepted
    order by id desc limit 1`;
  return Boolean(r?.review_reason);
}
