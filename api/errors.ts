import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { z } from 'zod';
import { ApiError } from '../core/platform/errors.ts';
import type { AppEnv } from './context.ts';
import { describeJsonProblem, fieldPath, findJsonProblem, NUMBER_OUT_OF_RANGE } from './schemas/json.ts';

const TARGET_LABEL: Record<string, string> = {
  json: 'body',
  query: 'query',
  param: 'path',
  header: 'header',
  form: 'form',
};

/** The value at `path` in the input as received, or `present: false` where the key is absent. */
function valueAt(input: unknown, path: readonly PropertyKey[]): { present: true; value: unknown } | { present: false } {
  let value = input;
  for (const key of path) {
    if (value === null || typeof value !== 'object' || typeof key === 'symbol' || !Object.hasOwn(value, key))
      return { present: false };
    value = (value as Record<string | number, unknown>)[key];
  }
  return { present: true, value };
}

/** zod's `expected` of an invalid_type issue, in words. */
const EXPECTED: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'a boolean',
  object: 'an object',
  record: 'an object',
  array: 'an array',
  null: 'null',
};

/**
 * What a received value is, in words: its JSON type ("a number", "an array", "null"), or the value
 * itself where the type alone would not say what is wrong: a string among allowed strings, a
 * fraction where an integer was expected, any query, path or header value (always a string).
 */
function describeReceived(value: unknown, o: { target: string; expected?: string; showStrings?: boolean }): string {
  if (typeof value === 'string' && (o.showStrings || (o.target !== 'json' && o.target !== 'form'))) {
    return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  }
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number' && o.expected === 'int') return String(value);
  switch (typeof value) {
    case 'string':
      return 'a string';
    case 'number':
      return 'a number';
    case 'boolean':
      return 'a boolean';
    case 'object':
      return 'an object';
    default:
      return typeof value;
  }
}

/** A number too large for a double (JSON's 1e309, or a query's "1e400"), which parses as ±Infinity. */
function outOfRange(value: unknown, target: string): boolean {
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'string' && target !== 'json' && target !== 'form'
        ? Number(value)
        : NaN;
  return n === Infinity || n === -Infinity;
}

/**
 * A 422 that names the offending field, from the first zod issue. `input` is the value as received
 * (zod 4 issues do not carry it): it tells a missing field from one present with the wrong type.
 */
function validationError(error: z.ZodError, target = 'json', input?: unknown): ApiError {
  const issue = error.issues[0]!;
  const where = TARGET_LABEL[target] ?? target;
  let field = fieldPath(issue.path);
  const received = valueAt(input, issue.path);
  let message: string;
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0]!;
    field = field ? `${field}.${key}` : key;
    message = `Unknown field "${field}" in ${where} (field names are case-sensitive)`;
  } else if (
    (issue.code === 'invalid_type' || issue.code === 'invalid_value' || issue.code === 'invalid_union') &&
    !received.present
  ) {
    message = `Missing required field "${field}" in ${where}`;
  } else if (issue.code === 'invalid_type' && received.present && outOfRange(received.value, target)) {
    // 1e309 is valid JSON, parsed as Infinity: a number, but none that fits (zod only says "expected a number").
    message = field
      ? `Invalid field "${field}" in ${where}: ${NUMBER_OUT_OF_RANGE}`
      : `Invalid ${where}: ${NUMBER_OUT_OF_RANGE}`;
  } else if (issue.code === 'invalid_type' && received.present) {
    const expected = EXPECTED[issue.expected] ?? issue.expected;
    const got = describeReceived(received.value, { target, expected: issue.expected });
    if (!field && target === 'json' && (issue.expected === 'object' || issue.expected === 'record'))
      message = `The request body must be a JSON object, got ${got}`;
    else
      message = field
        ? `Invalid field "${field}" in ${where}: expected ${expected}, got ${got}`
        : `Invalid ${where}: expected ${expected}, got ${got}`;
  } else if (issue.code === 'invalid_value') {
    const values = issue.values.map((v) => JSON.stringify(v)).join(', ');
    const expected = `${issue.values.length === 1 ? values : `one of ${values}`}, got ${describeReceived(received.present ? received.value : undefined, { target, showStrings: true })}`;
    message = field
      ? `Invalid field "${field}" in ${where}: expected ${expected}`
      : `Invalid ${where}: expected ${expected}`;
  } else {
    message = field ? `Invalid field "${field}" in ${where}: ${issue.message}` : `Invalid ${where}: ${issue.message}`;
  }
  return new ApiError('validation_error', message, {
    field: field || null,
    ...(error.issues.length > 1 ? { issues: error.issues.length } : {}),
  });
}

/**
 * The zod-openapi hook of every route: a failed validation becomes our 422, and so does a NUL
 * character anywhere in validated input (checked here once, not per schema: see schemas/json.ts).
 */
export function validationHook(
  result:
    | { success: true; data: unknown; target: string }
    | { success: false; error: z.ZodError; data: unknown; target: string },
): void {
  // On failure `data` is the input as received (zod-validator passes it to the hook).
  if (!result.success) throw validationError(result.error, result.target, result.data);
  const found = findJsonProblem(result.data);
  if (found) {
    const field = fieldPath(found.path);
    const where = TARGET_LABEL[result.target] ?? result.target;
    throw new ApiError(
      'validation_error',
      field
        ? `Invalid field "${field}" in ${where}: ${describeJsonProblem(found)}`
        : `Invalid ${where}: ${describeJsonProblem(found)}`,
      {
        field: field || null,
      },
    );
  }
}

/** Maps anything thrown to the error body (docs/api.md, "Errors"); unknown failures become 500 internal_error. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof HTTPException) {
    switch (err.status) {
      case 400:
        return new ApiError('malformed_json', 'Malformed JSON in request body');
      case 413:
        return new ApiError('payload_too_large', err.message || 'Request body too large');
      case 415:
        return new ApiError('unsupported_media_type', 'Unsupported Content-Type: send application/json');
      default:
        if (err.status >= 400 && err.status < 500) return new ApiError('bad_request', err.message || 'Bad request');
    }
  }
  if (err instanceof Error && err.name === 'AbortError') return new ApiError('request_aborted', 'Request aborted');
  return new ApiError(
    'internal_error',
    'Internal error: the request could not be completed. Retry, and quote the requestId if it persists',
  );
}

export function errorResponse(c: Context<AppEnv>, err: ApiError): Response {
  const services = c.get('services');
  const body = err.toBody(c.get('requestId'), services?.config.BILLING_URL);
  for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
  return c.json(body, err.status as 400);
}
