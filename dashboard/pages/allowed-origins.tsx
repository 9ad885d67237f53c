import { useEffect, useState, type FormEvent } from 'react';
import { apiClient, type Session } from '../api.ts';
import { Field, FormBanner, toFormError, useAction } from '../ui.tsx';

/**
 * The workspace's allowed origins, next to the embed snippet: the web pages that may join its calls
 * (docs/live-sessions.md, "Allowed origins"). Owners and admins edit them (one per line); members
 * read them.
 */
export function AllowedOrigins({ session }: { session: Session }) {
  const [text, setText] = useState<string | undefined>();
  const [saved, setSaved] = useState<string | undefined>();
  const { busy, error, setError, run } = useAction();

  useEffect(() => {
    apiClient(session)
      .workspace.get()
      .then((w) => setText(w.allowedOrigins.join('\n')))
      .catch((err: unknown) => setError(toFormError(err)));
  }, [session, setError]);

  function submit(e: FormEvent) {
    e.preventDefault();
    void run(async () => {
      setSaved(undefined);
      const allowedOrigins = (text ?? '')
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean);
      const w = await apiClient(session).workspace.update({ allowedOrigins });
      setText(w.allowedOrigins.join('\n'));
      setSaved(w.allowedOrigins.length ? 'Saved: only these origins can join.' : 'Saved: any page can join.');
    });
  }

  return (
    <form className="card" onSubmit={submit} aria-label="Allowed origins">
      <h2>Allowed origins</h2>
      <Field
        label="Origins whose pages may join calls (one per line)"
        name="allowedOrigins"
        error={error}
        hint="Empty: any page holding a grant can join. Otherwise grants carry a single-use join token the element redeems from one of these origins, e.g. https://app.example.com."
      >
        <textarea
          name="allowedOrigins"
          rows={4}
          value={text ?? ''}
          // Editable once the saved origins are in: typed sooner, they would be overwritten by them.
          readOnly={!session.canManageKeys || text === undefined}
          onChange={(e) => setText(e.target.value)}
          data-testid="allowed-origins"
        />
      </Field>
      <FormBanner error={error} fields={['allowedOrigins']} />
      {saved && <p role="status">{saved}</p>}
      {session.canManageKeys && (
        <button type="submit" disabled={busy || text === undefined}>
          Save origins
        </button>
      )}
    </form>
  );
}
