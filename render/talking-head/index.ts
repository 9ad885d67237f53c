/**
 * Talking head: portrait + speech (text through the embedded TTS, or given audio) → lip-synced
 * frames over the avatar's idle loop → MP4. Used by `npm run render`, the lipsync API and turns.
 *
 *   const speech = await speechFromText('Hello there.');
 *   await renderTalkingHeadMp4({ portrait: 'me.jpg', speech, out: 'hello.mp4' });
 */
export { mouthShape, renderTalkingHeadMp4 } from './talking-head.ts';
export { runLipsyncJob } from './job.ts';
export { speechFromAudioFile, speechFromText } from './speech.ts';
export { TalkingHeadError } from './errors.ts';
