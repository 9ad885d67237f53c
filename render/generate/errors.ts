/** Errors of motion generation that a caller (the API layer) can show to a user. */
export type GenerateErrorCode = 'invalid_duration' | 'invalid_prompt' | 'invalid_options';

export class GenerateError extends Error {
  override name = 'GenerateError';
  constructor(
    readonly code: GenerateErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export function isGenerateError(e: unknown): e is GenerateError {
  return e instanceof GenerateError;
}
