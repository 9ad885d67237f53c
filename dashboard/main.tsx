import { StrictMode, Suspense, lazy, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { loadSession, platform, type Session } from './api.ts';
import { AvatarPage, AvatarsPage } from './pages/avatars.tsx';
import { BillingPage } from './pages/billing.tsx';
import { KeysPage } from './pages/keys.tsx';
import { SignInPage } from './pages/signin.tsx';
import { toFormError } from './ui.tsx';
import './styles.css';

/** The playground's call (livekit-client) is a chunk of the bundle of its own, loaded when the page opens. */
const PlaygroundPage = lazy(() => import('./pages/playground.tsx').then((m) => ({ default: m.PlaygroundPage })));

/** The page of a path: the API serves the same shell at every /platform path. */
function route(path: string, session: Session) {
  const playground = /^\/platform\/dashboard\/avatars\/([^/]+)\/playground$/.exec(path);
  if (playground)
    return (
      <Suspense fallback={<p>Loading the playground…</p>}>
        <PlaygroundPage session={session} avatarId={decodeURIComponent(playground[1]!)} />
      </Suspense>
    );
  const avatar = /^\/platform\/dashboard\/avatars\/([^/]+)$/.exec(path);
  if (avatar) return <AvatarPage session={session} avatarId={decodeURIComponent(avatar[1]!)} />;
  if (path.startsWith('/platform/dashboard/avatars')) return <AvatarsPage session={session} />;
  if (path.startsWith('/platform/billing')) return <BillingPage session={session} />;
  return session.canManageKeys ? <KeysPage session={session} /> : <AvatarsPage session={session} />;
}

function Nav({ session }: { session: Session }) {
  const path = location.pathname;
  const link = (href: string, label: string, active: boolean) => (
    <a href={href} className={active ? 'active' : ''}>
      {label}
    </a>
  );
  return (
    <header className="top">
      <strong className="brand">Avatar platform</strong>
      <nav>
        {session.canManageKeys && link('/platform/dashboard', 'API keys', path === '/platform/dashboard')}
        {link('/platform/dashboard/avatars', 'Avatars', path.startsWith('/platform/dashboard/avatars'))}
        {link('/platform/billing', 'Usage and billing', path.startsWith('/platform/billing'))}
      </nav>
      <span className="who">
        {session.email} · {session.role}
        <button
          className="link"
          onClick={() => void platform(session, 'POST', '/signout').then(() => location.assign('/platform/dashboard'))}
        >
          Sign out
        </button>
      </span>
    </header>
  );
}

function App() {
  const [state, setState] = useState<{ session?: Session; loaded: boolean; error?: string }>({ loaded: false });
  useEffect(() => {
    if (location.pathname.startsWith('/platform/signin')) return;
    loadSession().then(
      (session) => setState({ session, loaded: true }),
      (err: unknown) => setState({ loaded: true, error: toFormError(err).message }),
    );
  }, []);
  if (location.pathname.startsWith('/platform/signin')) return <SignInPage />;
  if (!state.loaded) return <p className="page">Loading…</p>;
  if (state.error)
    return (
      <p className="page banner error" role="alert">
        {state.error}
      </p>
    );
  if (!state.session)
    return (
      <main className="page narrow">
        <h1>Sign in</h1>
        <p>
          The dashboard has no passwords. Ask an operator of this service for a sign-in link:{' '}
          <code>npm run --silent admin -- dashboard link --tenant TENANT_ID --email EMAIL --role owner</code>
        </p>
      </main>
    );
  return (
    <>
      <Nav session={state.session} />
      <main className="page">{route(location.pathname, state.session)}</main>
    </>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
