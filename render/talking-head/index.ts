/**
 * Talking head: portrait + speech (text through the embedded TTS, or given audio) → lip-synced
 * frames over the avatar's idle loop → MP4. Used by `npm run render`, the lipsync API and turns.
 *
 *   const speech = await speechFromText('Hello there.');
 *   await renderTalkingHeadMp4({ portrait: 'me.jpg', speech, out: 'hello.mp4' });
 */
export { mouthShape, renderTalkingHeadMp4, talkingHeadFrames } from './talking-head.ts';
export type { TalkingHeadOptions } from './talking-head.ts';
export { renderTalkingHeadOverCache } from './over-cache.ts';
export type { CacheTalkingHeadOptions, CacheTalkingHeadResult } from './over-cache.ts';
export { runLipsyncJob } from './job.ts';
export type { LipsyncJobRequest, LipsyncJobResult } from './job.ts';
export { decodeAudio, speechFromAudioFile, speechFromText, DECODE_SAMPLE_RATE, MAX_AUDIO_SECONDS } from './speech.ts';
export type { Speech } from './speech.ts';
export { TalkingHeadError, TALKING_HEAD_ERROR_CODES } from './errors.ts';
export type { TalkingHeadErrorCode } from './errors.ts';
