/**
 * Idle loops and clips end to end, at reduced size: seamless loops, blinks where scheduled,
 * gestures visible to the rig, neutral clip ends, MP4 output readable by ffprobe, bad input.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GenerateError } from './errors.ts';
import type { GeneratedMotion, PreparedPortrait } from './generate.ts';
import { generateClip, generateIdleLoop, preparePortrait } from './generate.ts';
import { writeMotion } from './write.ts';
import { ASTRONAUT, HOPPER, detectOn, eyeOpenness, meanAbsDiff, median } from './test-helpers.ts';

const SLOW = { timeout: 60_000 };
const S = 320;
const tmp = mkdtempSync(join(tmpdir(), 'generate-test-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

let astro: PreparedPortrait;
let hopper: PreparedPortrait;
beforeAll(async () => {
  [astro, hopper] = await Promise.all([
    preparePortrait(ASTRONAUT, { width: S }),
    preparePortrait(HOPPER, { width: S }),
  ]);
}, 60_000);

function allFrames(g: GeneratedMotion): Uint8Array[] {
  return [...g.frames({ copy: true })].map((f) => f.rgba);
}

describe('idle loop', () => {
  it('is seamless: last -> first is no bigger a step than a typical frame-to-frame one', SLOW, async () => {
    for (const p of [astro, hopper]) {
      const idle = await generateIdleLoop(p, { seconds: 8, fps: 25, seed: 11 });
      expect(idle.frameCount).toBe(200);
      expect(idle.loop).toBe(true);
      const frames = allFrames(idle);
      const steps = frames.slice(1).map((f, i) => meanAbsDiff(frames[i]!, f));
      const wrap = meanAbsDiff(frames[frames.length - 1]!, frames[0]!);
      expect(wrap).toBeLessThanOrEqual(1.25 * median(steps));
      // And it moves at all (breathing, drift): the loop is not a still.
      expect(Math.max(...frames.map((f) => meanAbsDiff(f, frames[0]!)))).toBeGreaterThan(0.5);
      // Frame 0 is the neutral framed portrait.
      expect(meanAbsDiff(frames[0]!, p.framed.rgba)).toBe(0);
    }
  });

  it('is deterministic given the seed, and differs across seeds', SLOW, async () => {
    const a = await generateIdleLoop(astro, { seconds: 4, fps: 10, seed: 'ava_1' });
    const b = await generateIdleLoop(astro, { seconds: 4, fps: 10, seed: 'ava_1' });
    const c = await generateIdleLoop(astro, { seconds: 4, fps: 10, seed: 'ava_2' });
    expect(a.params).toEqual(b.params);
    expect(meanAbsDiff(a.renderFrame(17).rgba, b.renderFrame(17).rgba)).toBe(0);
    expect(a.params).not.toEqual(c.params);
  });

  it('blinks at the scheduled peaks, with open eyes between blinks', SLOW, async () => {
    const idle = await generateIdleLoop(astro, { seconds: 8, fps: 25, seed: 5 });
    const peaks = idle.blinkPeaks;
    expect(peaks.length).toBeGreaterThanOrEqual(2);
    const open0 = eyeOpenness(await detectOn(idle.renderFrame(0).rgba, S, S));
    for (const t of peaks) {
      const i = Math.round(t * idle.fps);
      expect(idle.params[i]!.blinkLeft).toBe(1);
      const f = idle.renderFrame(i);
      const det = await detectOn(f.rgba, S, S);
      // Face Mesh v1 floors near 0.2 on shut eyes (see motion.test.ts); the moved rig shows ~0.
      expect(eyeOpenness(det)).toBeLessThan(0.9 * open0);
      expect(eyeOpenness(idle.prepared.model.rigFor(idle.params[i]!, f.landmarks))).toBeLessThan(0.05);
    }
    // Halfway between blinks the eyes are as open as at rest.
    const mid = Math.round(((peaks[0]! + peaks[1]!) / 2) * idle.fps);
    expect(idle.params[mid]!.blinkLeft).toBe(0);
    const between = eyeOpenness(await detectOn(idle.renderFrame(mid).rgba, S, S));
    expect(between).toBeGreaterThan(0.93 * open0);
  });

  it('takes a style from the avatar motion prompt', async () => {
    const happy = await generateIdleLoop(astro, { seconds: 4, fps: 10, motionPrompt: 'cheerful and smiling' });
    expect(Math.max(...happy.params.map((q) => q.smile))).toBeGreaterThan(0.2);
    await expect(generateIdleLoop(astro, { motionPrompt: '  ' })).rejects.toThrow(/empty/);
    await expect(generateIdleLoop(astro, { seconds: 1 })).rejects.toThrow(GenerateError);
  });
});

describe('motion clips', () => {
  it('start and end at idle frame 0 (the neutral pose)', SLOW, async () => {
    const idle0 = (await generateIdleLoop(hopper, { seconds: 4, fps: 25 })).renderFrame(0).rgba;
    const steps: number[] = [];
    for (const prompt of ['nod slowly, then smile', 'laugh', 'look left then tilt head right']) {
      const clip = await generateClip(hopper, { motionPrompt: prompt, durationSeconds: 4, fps: 25, seed: 2 });
      expect(clip.frameCount).toBe(100);
      const first = clip.renderFrame(0, undefined).rgba;
      const last = clip.renderFrame(clip.frameCount - 1).rgba;
      const prev = clip.renderFrame(clip.frameCount - 2).rgba;
      steps.push(meanAbsDiff(prev, last));
      expect(meanAbsDiff(first, idle0)).toBe(0);
      // The last frame is within one small step of neutral (idle frame 0 plays next).
      expect(meanAbsDiff(last, idle0)).toBeLessThan(0.6);
    }
  });

  it('"nod slowly" pitches the head down and up; "shake head" turns it left and right', SLOW, async () => {
    const nod = await generateClip(astro, { motionPrompt: 'nod slowly', durationSeconds: 4, fps: 25 });
    const shake = await generateClip(astro, { motionPrompt: 'shake head', durationSeconds: 4, fps: 25 });
    const base = (await detectOn(nod.renderFrame(0).rgba, S, S)).pose;
    const extreme = (g: GeneratedMotion, key: 'pitch' | 'yaw', sign: number): number => {
      let best = 0;
      g.params.forEach((q, i) => {
        if (sign * q[key] > sign * g.params[best]![key]) best = i;
      });
      return best;
    };
    const down = extreme(nod, 'pitch', -1);
    expect(nod.params[down]!.pitch).toBeLessThan(-5);
    const downPose = (await detectOn(nod.renderFrame(down).rgba, S, S)).pose;
    expect(downPose.pitch - base.pitch).toBeLessThan(-4);
    expect(Math.abs(downPose.pitch - base.pitch - nod.params[down]!.pitch)).toBeLessThan(3);
    // Between two nods the head comes back up.
    const pitch = nod.params.map((q) => q.pitch);
    const minima = pitch.filter(
      (v, i) => i > 0 && i < pitch.length - 1 && v < pitch[i - 1]! && v <= pitch[i + 1]! && v < -3,
    );
    expect(minima.length).toBeGreaterThanOrEqual(2);

    for (const sign of [1, -1]) {
      const i = extreme(shake, 'yaw', sign);
      expect(sign * shake.params[i]!.yaw).toBeGreaterThan(6);
      const pose = (await detectOn(shake.renderFrame(i).rgba, S, S)).pose;
      expect(sign * (pose.yaw - base.yaw)).toBeGreaterThan(3);
      expect(Math.abs(pose.yaw - base.yaw - shake.params[i]!.yaw)).toBeLessThan(4.5);
    }
  });

  it('reports unrecognised words', async () => {
    const clip = await generateClip(astro, { motionPrompt: 'nod then moonwalk', durationSeconds: 4, fps: 10 });
    expect(clip.unrecognized).toEqual(['moonwalk']);
  });

  it('refuses bad durations and prompts with clear errors', async () => {
    for (const durationSeconds of [3, 9, 4.5]) {
      await expect(generateClip(astro, { motionPrompt: 'nod', durationSeconds })).rejects.toMatchObject({
        code: 'invalid_duration',
        message: expect.stringMatching(/whole number of seconds from 4 to 8/),
      });
    }
    await expect(generateClip(astro, { motionPrompt: '' })).rejects.toMatchObject({ code: 'invalid_prompt' });
    await expect(generateClip(astro, { motionPrompt: 'nod'.repeat(401) })).rejects.toMatchObject({
      code: 'invalid_prompt',
    });
    await expect(generateClip(astro, { motionPrompt: 'nod', fps: 0 })).rejects.toMatchObject({
      code: 'invalid_options',
    });
  });
});

describe('writing', () => {
  it('writes an H.264 MP4 that ffprobe reads with the right frames, rate and size', SLOW, async () => {
    const clip = await generateClip(hopper, { motionPrompt: 'greet', durationSeconds: 4, fps: 25 });
    const path = join(tmp, 'greet.mp4');
    const r = await writeMotion(clip, { mp4Path: path });
    expect(r.mp4?.videoFrames).toBe(100);
    const probe = JSON.parse(
      execFileSync(
        'ffprobe',
        [
          '-v',
          'error',
          '-count_frames',
          '-show_entries',
          'stream=codec_type,codec_name,width,height,r_frame_rate,nb_read_frames',
          '-of',
          'json',
          path,
        ],
        {
          encoding: 'utf8',
        },
      ),
    ) as { streams: Record<string, string | number>[] };
    const video = probe.streams.find((s) => s.codec_type === 'video')!;
    expect(video).toMatchObject({
      codec_name: 'h264',
      width: S,
      height: S,
      r_frame_rate: '25/1',
      nb_read_frames: '100',
    });
    expect(probe.streams.find((s) => s.codec_type === 'audio')?.codec_name).toBe('aac');
  });
});
