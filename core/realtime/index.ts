/**
 * Realtime turns (docs/realtime.md): prepare, turn and the video-cache plan. `TurnService` runs
 * turns on `RealtimeMedia` (this process's renderer: the lip-sync engine and the open frame
 * caches); `VideoCachePlanner` and `VideoCacheWorker` keep avatars' frame caches at other settings.
 */
export { TurnService, TURN_MODES, TURN_TEXT_MAX_CHARS } from './turns.ts';
export type { TurnInput, TurnSummary } from './turns.ts';
export { RealtimeMedia } from './media.ts';
export { fetchFrameCache } from '../platform/storage/frame-caches.ts';
export { ChatModel, llmConfigured } from './llm.ts';
export { ConversationStore, CONVERSATION_ID_PATTERN, CONVERSATION_MAX_MESSAGES } from './conversations.ts';
export { loopFrameAt } from './cursor.ts';
export { VIDEO_CACHE_LIMITS, VideoCachePlanner } from './video-cache.ts';
