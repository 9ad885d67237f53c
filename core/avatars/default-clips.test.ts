import { describe, expect, it } from 'vitest';
import { checkClipDuration, planFromPrompt } from '../../render/generate/index.ts';
import { loadConfig } from '../platform/config.ts';
import { DEFAULT_CLIPS, DEFAULT_CLIP_IDS, defaultClipsFor } from '../../clips/declaration/default-clips.ts';

describe('default motion library', () => {
  it('every default prompt maps fully onto gestures, with a duration the generator accepts', () => {
    expect(DEFAULT_CLIPS.length).toBeGreaterThan(0);
    for (const c of DEFAULT_CLIPS) {
      const plan = planFromPrompt(c.motionPrompt, c.durationSeconds, 'x');
      expect(plan.unrecognized, c.clipId).toEqual([]);
      expect(plan.segments.flatMap((s) => s.actions).length, c.clipId).toBeGreaterThan(0);
      expect(checkClipDuration(c.durationSeconds)).toBe(c.durationSeconds);
      expect(c.clipId).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    }
    expect(new Set(DEFAULT_CLIP_IDS).size).toBe(DEFAULT_CLIPS.length);
  });

  it('DEFAULT_MOTION_CLIPS: all by default, a subset, empty for none, unknown ids refused', () => {
    expect(loadConfig({}).DEFAULT_MOTION_CLIPS).toEqual(DEFAULT_CLIP_IDS);
    expect(loadConfig({ DEFAULT_MOTION_CLIPS: ' smile, nod ' }).DEFAULT_MOTION_CLIPS).toEqual(['smile', 'nod']);
    expect(loadConfig({ DEFAULT_MOTION_CLIPS: '' }).DEFAULT_MOTION_CLIPS).toEqual([]);
    expect(() => loadConfig({ DEFAULT_MOTION_CLIPS: 'nod,dance' })).toThrow(/DEFAULT_MOTION_CLIPS/);
    expect(defaultClipsFor(['think', 'nod']).map((c) => c.clipId)).toEqual(['nod', 'think']);
  });
});
