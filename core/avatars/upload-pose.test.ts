import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, stillMp4 } from './test-support.ts';
import { anchorPose, checkUploadedClip, UPLOAD_CLIP_MAX_BYTES } from './upload-pose.ts';

describe('checkUploadedClip', () => {
  const portrait = readFileSync(path.join(FIXTURES, 'astronaut.jpg'));

  it('accepts a clip of the portrait itself (first, middle, last frames in pose)', async () => {
    const anchor = await anchorPose(portrait);
    const v = await checkUploadedClip(stillMp4('astronaut'), anchor);
    expect(v.verdict, JSON.stringify(v)).toBe('accepted');
    if (v.verdict === 'accepted') expect(v.frames.map((f) => f.at)).toEqual(['first', 'middle', 'last']);
  });

  it('refuses a clip without a face (no_face), a clip that is not a video and one over 18 MB', async () => {
    const anchor = await anchorPose(portrait);
    const v = await checkUploadedClip(stillMp4('brick'), anchor);
    expect(v).toMatchObject({ verdict: 'refused', code: 'no_face' });
    expect(await checkUploadedClip(Buffer.from('not a video at all'), anchor)).toMatchObject({
      verdict: 'refused',
      code: 'invalid_media',
    });
    expect(await checkUploadedClip(Buffer.alloc(UPLOAD_CLIP_MAX_BYTES + 1), anchor)).toMatchObject({
      verdict: 'refused',
      code: 'too_large',
    });
  });

  it('a rolled head (the portrait rotated 25°) is a pose_mismatch naming the roll', async () => {
    const anchor = await anchorPose(portrait);
    const v = await checkUploadedClip(stillMp4('astronaut', { rotateDeg: 25 }), anchor);
    expect(v, JSON.stringify(v)).toMatchObject({ verdict: 'pose_mismatch' });
    if (v.verdict === 'pose_mismatch') expect(v.message).toContain('roll');
  });

  it('a face out of the anchor pose is a pose_mismatch', async () => {
    const anchor = await anchorPose(portrait);
    const turned = { ...anchor, yawDeg: anchor.yawDeg + 40 };
    const v = await checkUploadedClip(stillMp4('astronaut'), turned);
    expect(v).toMatchObject({ verdict: 'pose_mismatch' });
    if (v.verdict === 'pose_mismatch') expect(v.message).toContain('yaw');
  });
});
