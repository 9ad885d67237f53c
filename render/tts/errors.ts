/**
 * Typed refusals of the embedded TTS. Callers switch on `code`, which is stable API;
 * `message` is for people and may change.
 */
export type TtsErrorCode =
  | 'empty_text' // nothing speakable after normalisation
  | 'text_too_long' // over MAX_TEXT_CHARS
  | 'unknown_voice' // not one of VOICES
  | 'invalid_speed' // speed outside MIN_SPEED..MAX_SPEED
  | 'synthesis_failed'; // flite itself failed (a bug or resource exhaustion, not the caller's input)

export class TtsError extends Error {
  override readonly name = 'TtsError';
  readonly code: TtsErrorCode;
  /** Measured values behind the refusal (lengths, limits, names), for logs and UI hints. */
  readonly details: Readonly<Record<string, number | string>>;

  constructor(
    code: TtsErrorCode,
    message: string,
    options: { details?: Record<string, number | string>; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details ?? {};
  }
}

export function isTtsError(err: unknown): err is TtsError {
  return err instanceof TtsError;
}
