export {
  LipsyncService,
  lipsyncResultKey,
  type LipsyncLimits,
  type LipsyncRequest,
  type LipsyncResult,
  type LipsyncServiceDeps,
} from './service.ts';
export { fetchMedia, type FetchedMedia, type FetchMediaInput } from './media.ts';
export { LipsyncPortraits, type SpeakingAvatar } from './portraits.ts';
export { LocalFrameCaches } from '../storage/frame-caches.ts';
