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
export {
  CLIP_SECONDS_MAX,
  CLIP_SECONDS_MIN,
  DEFAULT_CLIP_SECONDS,
  DEFAULT_FPS,
  DEFAULT_IDLE_SECONDS,
  checkClipDuration,
  generateClip,
  generateIdleLoop,
  preparePortrait,
} from './generate.ts';
export type { ClipOptions, GeneratedMotion, IdleLoopOptions, PortraitInput, PreparedPortrait } from './generate.ts';
export { framePortrait, DEFAULT_EYE_LEVEL, DEFAULT_FACE_WIDTH, DEFAULT_FRAME_SIZE } from './framing.ts';
export type { FramedPortrait, FramingOptions } from './framing.ts';
export { MotionModel, NEUTRAL_PARAMS, PARAM_LIMITS, clampParams } from './motion.ts';
export type { MotionFrame, MotionModelOptions, MotionParams } from './motion.ts';
export { ACTION_KINDS, MOTION_PROMPT_MAX, normalizePrompt, planFromPrompt, planTrack } from './prompt.ts';
export type { ActionKind, Direction, MotionPlan, PlanSegment, PlannedAction } from './prompt.ts';
export { blinkShape, scheduleBlinks } from './track.ts';
export { GenerateError, GENERATE_ERROR_CODES, isGenerateError } from './errors.ts';
export type { GenerateErrorCode } from './errors.ts';
export { writeMotion, GENERATOR_VERSION } from './write.ts';
export { REVIEWED_LIMITS, runRenderJob } from './job.ts';
export type { RenderRequest, RenderResult } from './job.ts';
export type { WriteMotionOptions, WriteMotionResult } from './write.ts';
