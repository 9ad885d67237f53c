/** Refusals of a talking-head render that a user can act on (bad audio, bad text, bad options). */
export type TalkingHeadErrorCode = 'invalid_audio' | 'audio_too_long' | 'invalid_options';

export class TalkingHeadError extends Error {
  override name = 'TalkingHeadError';
  constructor(
    readonly code: TalkingHeadErrorCode,
    message: string,
  ) {
    super(message);
  }
}
