import { ApiError } from '../errors.ts';
import type { SafeFetchError } from './safe-fetch.ts';

/**
 * The API error of a user-supplied URL the safe fetcher could not fetch, naming the request field
 * that held it (`remoteUrl` of a remote asset, `audioUrl` and `portraitUrl` of a lipsync): the URL's
 * form or address refused and the remote's 4xx are the user's to fix (422); a file over the cap is
 * 413; an unreachable or failing remote is 502, a slow one 504.
 */
export function fetchFailure(cause: SafeFetchError, field: string, extra: Record<string, unknown> = {}): ApiError {
  switch (cause.reason) {
    case 'invalid_url':
      return new ApiError('validation_error', `Invalid field "${field}": ${cause.message}`, { field, ...extra });
    case 'forbidden_address':
    case 'too_many_redirects':
      return new ApiError('remote_url_refused', `Invalid field "${field}": ${cause.message}`, { field, ...extra });
    case 'too_large':
      return new ApiError('payload_too_large', `Invalid field "${field}": ${cause.message}`, { field, ...extra });
    case 'http_status':
      if (cause.status !== undefined && cause.status < 500) {
        return new ApiError('validation_error', `Invalid field "${field}": ${cause.message}`, {
          field,
          upstreamStatus: cause.status,
          ...extra,
        });
      }
      return new ApiError('upstream_unreachable', cause.message, {
        field,
        upstreamStatus: cause.status ?? null,
        ...extra,
      });
    case 'timeout':
      return new ApiError('upstream_timeout', cause.message, { field, ...extra });
    case 'unreachable':
      return new ApiError('upstream_unreachable', cause.message, { field, ...extra });
  }
}
