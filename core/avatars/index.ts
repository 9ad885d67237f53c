export { AvatarService } from './service.ts';
export {
  DEFAULT_LANGUAGE,
  languageName,
  PROFILE_LIMITS,
  SESSION_INSTRUCTIONS_MAX,
  sessionInstructions,
} from './profile.ts';
export { type PromptScreen } from './screen.ts';
export type { PortraitAssets } from './ports.ts';
export * from './types.ts';

import type { Config } from '../platform/config.ts';
import type { Logger } from '../platform/log.ts';
import { LocalPromptScreen, ModerationPromptScreen, type PromptScreen } from './screen.ts';

/** The moderation endpoint when MODERATION_URL is set, otherwise the local rule set. */
export function createPromptScreen(config: Config, log: Logger): PromptScreen {
  if (config.MODERATION_URL)
    return new ModerationPromptScreen(config.MODERATION_URL, config.MODERATION_API_KEY ?? config.OPENAI_API_KEY, log);
  return new LocalPromptScreen();
}
