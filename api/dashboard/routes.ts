import type { Context } from 'hono';
import { canManageKeys, type DashboardKey, type DashboardSession } from '../../core/dashboard/auth.ts';
import type { Config } from '../../core/platform/config.ts';
import { ApiError } from '../../core/platform/errors.ts';
import type { App, AppEnv } from '../context.ts';
import { capBody } from '../middleware/guard.ts';
import { dashboardBundle, embedBundle, type DashboardBundle } from './bundle.ts';
import {
  assertSameOrigin,
  clearSessionCookie,
  CSRF_HEADER,
  requireSession,
  sessionToken,
  setSessionCookie,
} from './session.ts';

/** The pages of the dashboard: one HTML shell, the browser code shows the page of its path. */
const PAGES = ['/platform', '/platform/dashboard', '/platform/dashboard/*', '/platform/billing', '/platform/signin'];

/**
 * The page's Content-Security-Policy: scripts, styles and calls of this origin only; media (avatars'
 * loops and clips, recordings) from this origin or the object storage that signs their URLs.
 */
function contentSecurityPolicy(config: Config): string {
  // Local media URLs are signed on PUBLIC_BASE_URL, which may not be the origin the page was opened on.
  const media = ["'self'", new URL(config.publicBaseUrl).origin, 'blob:'];
  if (config.S3_ENDPOINT) media.push(new URL(config.S3_ENDPOINT).origin);
  else if (config.S3_BUCKET) media.push('https:');
  // The playground joins calls on LiveKit: its signalling WebSocket and, on a failed join, its HTTP validation.
  const connect = ["'self'"];
  const livekit = config.LIVEKIT_PUBLIC_URL ?? config.LIVEKIT_URL;
  if (livekit) {
    const u = new URL(livekit);
    const secure = u.protocol === 'wss:' || u.protocol === 'https:';
    connect.push(`${secure ? 'wss' : 'ws'}://${u.host}`, `${secure ? 'https' : 'http'}://${u.host}`);
  }
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src ${media.join(' ')} data:`,
    `media-src ${media.join(' ')}`,
    `connect-src ${connect.join(' ')}`,
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

const SECURITY_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
};

function shell(b: DashboardBundle): string {
  const css = b.stylesheet ? `<link rel="stylesheet" href="/platform/assets/${b.stylesheet}">` : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Avatar platform</title>
<link rel="icon" href="data:,">
${css}
</head>
<body>
<div id="root"></div>
<script type="module" src="/platform/assets/${b.script}"></script>
</body>
</html>
`;
}

/** What the dashboard shows of a key: masked, never its secret. */
function keyView(k: DashboardKey) {
  return {
    id: k.id,
    name: k.name,
    redactedKey: k.redactedKey,
    scopes: k.scopes,
    status: k.status,
    spendLimitCreditMicros: k.spendLimitCreditMicros,
    spentCreditMicros: k.spentCreditMicros,
    createdAt: k.createdAt.toISOString(),
    expiresAt: k.expiresAt?.toISOString() ?? null,
    copyable: k.copyable,
    notCopyableReason: k.notCopyableReason,
  };
}

function sessionView(s: DashboardSession) {
  return {
    email: s.email,
    role: s.role,
    tenantId: s.tenantId,
    canManageKeys: canManageKeys(s.role),
    csrfToken: s.csrfToken,
    expiresAt: s.expiresAt.toISOString(),
  };
}

async function keyManager(c: Context<AppEnv>): Promise<DashboardSession> {
  const session = await requireSession(c);
  assertSameOrigin(c);
  if (!canManageKeys(session.role))
    throw new ApiError('forbidden', 'Only owners and admins of the workspace manage its keys');
  return session;
}

/**
 * The dashboard (docs/dashboard.md), outside /api/v1: its pages, its bundled browser code, and the
 * few calls that are the dashboard's own (sign-in, the session, listing, copying and revoking keys).
 * Everything else the pages do goes through /api/v1 with the client library, as the session.
 */
export function registerDashboard(app: App): void {
  for (const page of PAGES) {
    app.get(page, async (c) => {
      const b = await dashboardBundle();
      return c.body(shell(b), 200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Content-Security-Policy': contentSecurityPolicy(c.get('services').config),
        // The shell names the current bundle: always revalidated.
        'Cache-Control': 'no-cache',
        ...SECURITY_HEADERS,
      });
    });
  }
  app.get('/platform/assets/:name', async (c) => {
    const asset = (await dashboardBundle()).assets.get(c.req.param('name'));
    if (!asset) throw new ApiError('not_found', `No dashboard asset ${c.req.param('name')}`);
    return c.body(asset.body as Uint8Array<ArrayBuffer>, 200, {
      'Content-Type': asset.contentType,
      'Cache-Control': 'public, max-age=31536000, immutable',
      ...SECURITY_HEADERS,
    });
  });

  // The embeddable call, for tenants' own pages on any origin (public code, no credentials).
  app.get('/platform/embed.js', async (c) =>
    c.body((await embedBundle()) as Uint8Array<ArrayBuffer>, 200, {
      'Content-Type': 'text/javascript; charset=utf-8',
      'Cache-Control': 'public, max-age=300',
      'Access-Control-Allow-Origin': '*',
      'Cross-Origin-Resource-Policy': 'cross-origin',
      'X-Content-Type-Options': 'nosniff',
    }),
  );

  // Redeems a sign-in link. The anti-forgery header is required here too: another site's page can
  // neither send it without a preflight nor sign a browser in to a workspace of the attacker's.
  app.post('/platform/api/signin', capBody(1024), async (c) => {
    assertSameOrigin(c);
    if (!c.req.header(CSRF_HEADER)) throw new ApiError('forbidden', `Missing ${CSRF_HEADER} header`);
    const body = (await c.req.json().catch(() => undefined)) as { token?: unknown } | undefined;
    if (!body || typeof body.token !== 'string' || body.token.length === 0 || body.token.length > 200)
      throw new ApiError('validation_error', 'Invalid field "token" in body: the token of the sign-in link', {
        field: 'token',
      });
    const { sessionToken, session } = await c.get('services').dashboard.redeem(body.token);
    setSessionCookie(c, sessionToken, session.expiresAt);
    return c.json(sessionView(session));
  });

  // Who is signed in, and the anti-forgery token the page repeats on every call (readable by this
  // origin only: no CORS).
  app.get('/platform/api/session', async (c) => c.json(sessionView(await requireSession(c, { csrf: false }))));

  app.post('/platform/api/signout', async (c) => {
    await requireSession(c);
    await c.get('services').dashboard.signOut(sessionToken(c)!);
    clearSessionCookie(c);
    return c.body(null, 204);
  });

  app.get('/platform/api/keys', async (c) => {
    const session = await keyManager(c);
    const keys = await c.get('services').dashboard.listKeys(session.tenantId);
    return c.json({ data: keys.map(keyView) });
  });

  app.post('/platform/api/keys/:id/copy', async (c) => {
    const session = await keyManager(c);
    const apiKey = await c.get('services').dashboard.copyKey(session, c.req.param('id'));
    return c.json({ apiKey });
  });

  app.post('/platform/api/keys/:id/revoke', async (c) => {
    const session = await keyManager(c);
    const k = await c.get('services').dashboard.revokeKey(session, c.req.param('id'));
    return c.json({ id: k.id, status: k.status });
  });
}
