/**
 * The warm-up face is the rig of the portrait it names, and warming an engine draws real mouths on
 * it (built-in engine) or feeds a neural model its audio.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { i420Planes } from '../encode/index.ts';
import { detectFaceRig } from '../rig/index.ts';
import {
  createLipSync,
  loadNeuralLipSync,
  warmUpLipSync,
  warmUpRig,
  type LipSyncEngine,
  type LipSyncI420Item,
} from './index.ts';
import { AUTO_CROP_SIZES, autoCropSize } from '../synth/prepare.ts';
import { WARM_UP_FACE_FILE, type StoredFace } from './warm-up.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** The engine, with the batches it was given kept. */
function recording(engine: LipSyncEngine): { engine: LipSyncEngine; batches: LipSyncI420Item[][] } {
  const batches: LipSyncI420Item[][] = [];
  return {
    batches,
    engine: {
      ...engine,
      prepare: (rig) => engine.prepare(rig),
      renderI420: async (items) => {
        batches.push([...items]);
        await engine.renderI420(items);
      },
    },
  };
}

describe('lip-sync warm-up', () => {
  it('uses the rig of the portrait it names (regenerated the same way if the rig changes)', async () => {
    const stored = JSON.parse(readFileSync(WARM_UP_FACE_FILE, 'utf8')) as StoredFace;
    const rig = await detectFaceRig(`${REPO}${stored.source}`);
    expect(rig.imageSize).toEqual(stored.imageSize);
    expect(stored.landmarks.length).toBe(rig.landmarks.length * 3);
    const worst = Math.max(
      ...rig.landmarks.map((p, i) =>
        Math.max(Math.abs(p.x - stored.landmarks[i * 3]!), Math.abs(p.y - stored.landmarks[i * 3 + 1]!)),
      ),
    );
    // Stored to 0.1 px.
    expect(worst).toBeLessThanOrEqual(0.06);
  }, 60_000);

  it("draws the built-in engine's mouths, closed to wide open, on the stored face", async () => {
    const builtin = await createLipSync('builtin');
    try {
      const { engine, batches } = recording(builtin);
      await warmUpLipSync(engine, { batch: 4, runs: 1 });
      expect(batches, 'the run on the stored face, then the one at every crop size').toHaveLength(2);
      const rig = warmUpRig();
      const lips = rig.lips.outer;
      const cx = Math.round(lips.reduce((a, p) => a + p.x, 0) / lips.length);
      const cy = Math.round(lips.reduce((a, p) => a + p.y, 0) / lips.length);
      const opens = batches[0]!.map((item) => {
        const { y, strideY } = i420Planes(item.i420, item.width, item.height);
        // The grey frame (128) darkened where the mouth opened.
        let dark = 0;
        for (let dy = -6; dy <= 6; dy++)
          for (let dx = -10; dx <= 10; dx++) dark += 128 - y[(cy + dy) * strideY + cx + dx]!;
        return dark;
      });
      expect(opens[0]!, 'a mouth drawn at the lips of the stored face').toBeGreaterThan(0);
      expect(opens.at(-1)!, 'the widest the darkest').toBeGreaterThan(opens[0]!);
    } finally {
      await builtin.release();
    }
  }, 60_000);

  it("then draws at every crop size the built-in engine's faces can take, on every thread of a pool", async () => {
    const builtin = await createLipSync('builtin');
    try {
      const { engine, batches } = recording(builtin);
      await warmUpLipSync(engine, { batch: 2, runs: 1, sizeSpread: 3 });
      const sizes = batches[1]!.map((item) => (item.face.kind === 'builtin' ? item.face.cropSize : 0));
      expect(sizes).toEqual(AUTO_CROP_SIZES.flatMap((S) => [S, S, S]));
      // Every size 'auto' can choose, from the smallest face to the largest.
      expect(AUTO_CROP_SIZES[0]).toBe(autoCropSize(0));
      expect(AUTO_CROP_SIZES.at(-1)).toBe(autoCropSize(10_000));
    } finally {
      await builtin.release();
    }
  }, 60_000);

  it('feeds a neural model a voice-like sound for each frame', async () => {
    const neural = await loadNeuralLipSync(`${REPO}render/lipsync/fixtures/wav2lip_hq_96.onnx`);
    try {
      const { engine, batches } = recording(neural);
      await warmUpLipSync(engine, { batch: 2, runs: 2 });
      const items = batches.flat();
      expect(items.map((i) => i.audio?.frame)).toEqual([0, 1, 2, 3]);
      for (const item of items) expect(Math.max(...item.audio!.pcm)).toBeGreaterThan(3000);
    } finally {
      await neural.release();
    }
  }, 60_000);
});
