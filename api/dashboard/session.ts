import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { Principal } from '../../core/auth/key-store.ts';
import type { DashboardSession } from '../../core/dashboard/auth.ts';
import { ApiError } from '../../core/platform/errors.ts';
import type { AppEnv } from '../context.ts';

/** The session cookie: HttpOnly (no script reads it), SameSite=Strict, Secure behind https. */
const SESSION_COOKIE = 'avatar_dashboard';
/**
 * The anti-forgery header every cookie-authenticated call carries: the session's token, which only a
 * page of this origin can read (GET /platform/api/session; no CORS). A form or a link from another
 * site cannot set a header, and a script there cannot without a preflight this service never grants.
 */
export const CSRF_HEADER = 'x-dashboard-csrf';

export function sessionToken(c: Context<AppEnv>): string | undefined {
  return getCookie(c, SESSION_COOKIE);
}

/**
 * Refuses a request a browser sent from another origin (403): its `Origin`, when present, must be
 * this service's public origin or the origin the request was addressed to (`Host`), and
 * `Sec-Fetch-Site`, when present, must not say cross-site.
 */
export function assertSameOrigin(c: Context<AppEnv>): void {
  const site = c.req.header('sec-fetch-site');
  const origin = c.req.header('origin');
  let ok = site === undefined || site === 'same-origin' || site === 'none';
  if (ok && origin !== undefined) {
    const publicOrigin = new URL(c.get('services').config.publicBaseUrl).origin;
    let host: string | undefined;
    try {
      host = new URL(origin).host;
    } catch {
      host = undefined;
    }
    ok = origin === publicOrigin || (host !== undefined && host === c.req.header('host'));
  }
  if (!ok) throw new ApiError('forbidden', 'Cross-origin request refused: the dashboard answers only its own pages');
}

/**
 * The signed-in session of a dashboard request, or undefined without a cookie. A cookie that signs
 * in no one (signed out, expired) is 401; a request from another origin, or without the session's
 * anti-forgery header, is 403.
 */
export async function dashboardSession(
  c: Context<AppEnv>,
  o: { csrf: boolean } = { csrf: true },
): Promise<DashboardSession | undefined> {
  const token = getCookie(c, SESSION_COOKIE);
  if (token === undefined) return undefined;
  assertSameOrigin(c);
  const session = await c.get('services').dashboard.verify(token);
  if (!session) throw new ApiError('unauthorized', 'The dashboard session has ended or expired: sign in again');
  if (o.csrf && c.req.header(CSRF_HEADER) !== session.csrfToken)
    throw new ApiError(
      'forbidden',
      `Missing or wrong ${CSRF_HEADER} header: dashboard calls repeat the session's token`,
    );
  if (session.tenantStatus !== 'active') throw new ApiError('tenant_not_active', 'Tenant is not active');
  return session;
}

/** The session of a dashboard call that needs one: 401 without a cookie. */
export async function requireSession(c: Context<AppEnv>, o?: { csrf: boolean }): Promise<DashboardSession> {
  const session = await dashboardSession(c, o);
  if (!session) throw new ApiError('unauthorized', 'Not signed in to the dashboard: open a sign-in link');
  return session;
}

/** What the API sees of a session: its key's id and scopes (the role's), no spend limit. */
export function sessionPrincipal(s: DashboardSession): Principal {
  return {
    apiKeyId: s.apiKeyId,
    tenantId: s.tenantId,
    scopes: s.scopes,
    spendLimitCreditMicros: null,
    dashboardSessionId: s.id,
  };
}

export function setSessionCookie(c: Context<AppEnv>, token: string, expiresAt: Date): void {
  setCookie(c, SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: 'Strict',
    secure: c.get('services').config.publicBaseUrl.startsWith('https:'),
    path: '/',
    expires: expiresAt,
  });
}

export function clearSessionCookie(c: Context<AppEnv>): void {
  deleteCookie(c, SESSION_COOKIE, { path: '/' });
}
