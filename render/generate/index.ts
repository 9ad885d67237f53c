/**
 * Motion generation from one portrait: framing, the motion model (head, blinks, breathing,
 * brows, smile, gaze as a landmark-driven warp), seamless idle loops, prompt-directed clips,
 * and writing them as MP4 and frame caches.
 *
 *   const p = await preparePortrait(portraitBytes);            // frame + rig once per avatar
 *   const idle = await generateIdleLoop(p, { seed: avatarId });
 *   await writeMotion(idle, { mp4Path, cacheDir });
 *   const clip = await generateClip(p, { motionPrompt: 'nod slowly, then smile', durationSeconds: 5 });
 *   clip.unrecognized;                                           // words the rules did not map
 */
export { DEFAULT_FPS, checkClipDuration, generateIdleLoop, preparePortrait } from './generate.ts';
export type { GeneratedMotion, PortraitInput } from './generate.ts';
export { DEFAULT_FRAME_SIZE } from './framing.ts';
export { MOTION_PROMPT_MAX, planFromPrompt } from './prompt.ts';
export { isGenerateError } from './errors.ts';
export { writeMotion } from './write.ts';
export { REVIEWED_LIMITS, runRenderJob } from './job.ts';
export type { RenderRequest, RenderResult } from './job.ts';
