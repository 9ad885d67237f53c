import { ApiError, AvatarClient } from '../client/index.ts';

/** Who is signed in (GET /platform/api/session), and the anti-forgery token every call repeats. */
export interface Session {
  email: string;
  role: 'owner' | 'admin' | 'member';
  tenantId: string;
  canManageKeys: boolean;
  csrfToken: string;
  expiresAt: string;
}

const CSRF_HEADER = 'x-dashboard-csrf';

/** The signed-in session, or undefined when this browser is not signed in (401). */
export async function loadSession(): Promise<Session | undefined> {
  const res = await fetch('/platform/api/session', { headers: { accept: 'application/json' } });
  if (res.status === 401) return undefined;
  if (!res.ok) throw await ApiError.fromResponse(res);
  return (await res.json()) as Session;
}

/**
 * The client library, authenticated by the session: the browser sends the HttpOnly cookie itself
 * (same origin), and the API takes it only with the anti-forgery header. No API key is in the page.
 */
export function apiClient(s: Session): AvatarClient {
  return new AvatarClient({ baseUrl: location.origin, sessionHeaders: { [CSRF_HEADER]: s.csrfToken } });
}

/** A call to the dashboard's own endpoints (/platform/api): errors are the API's error body, as ApiError. */
export async function platform<T>(s: Session | undefined, method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', [CSRF_HEADER]: s?.csrfToken ?? 'signin' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`/platform/api${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw await ApiError.fromResponse(res);
  return (res.status === 204 ? undefined : await res.json()) as T;
}

export { ApiError };

/**
 * Releases a live session if the page goes away mid-call (tab closed, navigated away): a request
 * that outlives the page (`keepalive`), with the session's anti-forgery header.
 */
export function releaseOnUnload(s: Session, sessionId: string): void {
  addEventListener(
    'pagehide',
    () =>
      void fetch('/api/v1/realtime/livekit/session/release', {
        method: 'POST',
        keepalive: true,
        headers: { 'content-type': 'application/json', [CSRF_HEADER]: s.csrfToken },
        body: JSON.stringify({ session_id: sessionId }),
      }).catch(() => undefined),
    { once: true },
  );
}
