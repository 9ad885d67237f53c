export {
  AvatarService,
  AVATAR_LIST_MAX,
  SERVING_URL_TTL_SECONDS,
  type CreateAvatarInput,
  type UpdateAvatarInput,
} from './service.ts';
export { LoopWorker, loopPrefix } from './generation.ts';
export { PROFILE_LIMITS, SESSION_INSTRUCTIONS_MAX, sessionInstructions } from './profile.ts';
export {
  LocalPromptScreen,
  ModerationPromptScreen,
  localVerdict,
  DISALLOWED_TERMS,
  type PromptScreen,
} from './screen.ts';
export type { PortraitAsset, PortraitAssets } from './ports.ts';
export * from './types.ts';

import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import { LocalPromptScreen, ModerationPromptScreen, type PromptScreen } from './screen.ts';

/** The moderation endpoint when MODERATION_URL is set, otherwise the local rule set. */
export function createPromptScreen(config: Config, log: Logger): PromptScreen {
  if (config.MODERATION_URL)
    return new ModerationPromptScreen(config.MODERATION_URL, config.MODERATION_API_KEY ?? config.OPENAI_API_KEY, log);
  return new LocalPromptScreen();
}
