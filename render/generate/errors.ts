/** Errors of motion generation that a caller (the API layer) can show to a user. */
export const GENERATE_ERROR_CODES = ['invalid_duration', 'invalid_prompt', 'invalid_options'] as const;
export type GenerateErrorCode = (typeof GENERATE_ERROR_CODES)[number];

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
