/**
 * Realtime turns (docs/realtime.md): prepare, turn and the video-cache plan. `TurnService` runs
 * turns on `RealtimeMedia` (this process's renderer: the lip-sync engine and the open frame
 * caches); `VideoCachePlanner` and `VideoCacheWorker` keep avatars' frame caches at other settings.
 */
export { TurnService, TURN_MODES, TURN_TEXT_MAX_CHARS, turnError, voiceOf } from './turns.ts';
export type {
  CheckedTurn,
  PrepareAnswer,
  StartedTurn,
  TurnInput,
  TurnMode,
  TurnServiceDeps,
  TurnSummary,
} from './turns.ts';
export { RealtimeMedia } from './media.ts';
export { fetchFrameCache } from '../storage/frame-caches.ts';
export type { HeldMedia, RealtimeMediaOptions } from './media.ts';
export { ChatModel, llmConfigured } from './llm.ts';
export type { ChatMessage } from './llm.ts';
export {
  ConversationStore,
  boundHistory,
  CONVERSATION_ID_PATTERN,
  CONVERSATION_MAX_CHARS,
  CONVERSATION_MAX_MESSAGES,
  CONVERSATION_TTL_SECONDS,
} from './conversations.ts';
export { loopFrameAt } from './cursor.ts';
export { StreamSink, StreamStopped } from './sink.ts';
export {
  LOOP_CLIP_ID,
  VIDEO_CACHE_JOB,
  VIDEO_CACHE_LIMITS,
  VideoCachePlanner,
  VideoCacheWorker,
} from './video-cache.ts';
export type { ManifestEntry, PlanAnswer, PlanEntry } from './video-cache.ts';
