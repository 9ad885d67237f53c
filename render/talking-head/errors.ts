/** Refusals of a talking-head render that a user can act on (bad audio, bad text, bad options). */
export const TALKING_HEAD_ERROR_CODES = ['invalid_audio', 'audio_too_long', 'invalid_options'] as const;
export type TalkingHeadErrorCode = (typeof TALKING_HEAD_ERROR_CODES)[number];

export class TalkingHeadError extends Error {
  override name = 'TalkingHeadError';
  constructor(
    readonly code: TalkingHeadErrorCode,
    message: string,
  ) {
    super(message);
  }
}
