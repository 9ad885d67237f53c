import { useEffect, useState } from 'react';
import { platform } from '../api.ts';
import { toFormError } from '../ui.tsx';

/**
 * Redeems the one-time link's token (in the URL's fragment, which no server sees) for a session
 * cookie, then opens the dashboard. The fragment is cleared from the address bar and history first.
 */
export function SignInPage() {
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    const token = new URLSearchParams(location.hash.slice(1)).get('token');
    history.replaceState(null, '', location.pathname);
    if (!token) {
      setError('This sign-in link has no token: open the whole link the operator gave you.');
      return;
    }
    platform(undefined, 'POST', '/signin', { token }).then(
      () => location.replace('/platform/dashboard'),
      (err: unknown) => setError(toFormError(err).message),
    );
  }, []);
  return (
    <main className="page narrow">
      <h1>Signing in</h1>
      {error ? (
        <p className="banner error" role="alert">
          {error}
        </p>
      ) : (
        <p>One moment…</p>
      )}
    </main>
  );
}
