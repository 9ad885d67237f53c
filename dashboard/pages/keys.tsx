import { useEffect, useState, type FormEvent } from 'react';
import { apiClient, platform, type Session } from '../api.ts';
import { Field, FormBanner, formatCredits, formatDate, toFormError, useAction } from '../ui.tsx';

const SCOPES = [
  'realtime:write',
  'credits:read',
  'avatars:read',
  'avatars:write',
  'usage:read',
  'usage:write',
  'recordings:read',
  'api_keys:write',
  '*',
] as const;
type Scope = (typeof SCOPES)[number];
const DEFAULT_SCOPES: Scope[] = ['realtime:write', 'credits:read', 'avatars:read'];

interface KeyRow {
  id: string;
  name: string;
  redactedKey: string;
  scopes: string[];
  status: 'active' | 'revoked';
  spendLimitCreditMicros: number | null;
  spentCreditMicros: number;
  createdAt: string;
  expiresAt: string | null;
  copyable: boolean;
  notCopyableReason: string | null;
}

/** Copies a key's full value to the clipboard; the value is never put on the page. */
async function toClipboard(value: string): Promise<void> {
  await navigator.clipboard.writeText(value);
}

function CreateKey({ session, onCreated }: { session: Session; onCreated: (name: string) => void }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<Scope[]>(DEFAULT_SCOPES);
  const [limit, setLimit] = useState('');
  const [expires, setExpires] = useState('');
  const { busy, error, setError, run } = useAction();
  const fields = ['name', 'scopes', 'spendLimitCreditMicros', 'expiresAt'];

  function submit(e: FormEvent) {
    e.preventDefault();
    void run(async () => {
      // Sent as typed: the API validates, and its error is shown at the field it names.
      const spend = limit.trim() === '' ? null : Number(limit);
      const expiresAt = expires ? new Date(expires).toISOString() : null;
      if (expires && Number.isNaN(Date.parse(expires))) {
        setError({ field: 'expiresAt', message: 'Not a date and time' });
        return;
      }
      const created = await apiClient(session).apiKeys.create({
        name,
        scopes,
        spendLimitCreditMicros: spend,
        expiresAt,
      });
      await toClipboard(created.apiKey).catch(() => undefined);
      setName('');
      setLimit('');
      setExpires('');
      onCreated(created.name);
    });
  }

  return (
    <form className="card" onSubmit={submit} aria-label="Create a key">
      <h2>Create a key</h2>
      <Field label="Name" name="name" error={error}>
        <input name="name" value={name} onChange={(e) => setName(e.target.value)} placeholder="backend" />
      </Field>
      <Field label="Scopes" name="scopes" error={error}>
        <span className="checks">
          {SCOPES.map((s) => (
            <label key={s} className="check">
              <input
                type="checkbox"
                name={`scope-${s}`}
                checked={scopes.includes(s)}
                onChange={(e) => setScopes(e.target.checked ? [...scopes, s] : scopes.filter((x) => x !== s))}
              />
              {s}
            </label>
          ))}
        </span>
      </Field>
      <Field
        label="Spend limit (credit micros)"
        name="spendLimitCreditMicros"
        error={error}
        hint="What this key may spend; empty: no limit. 1,000,000 credit micros are one second of avatar time."
      >
        <input
          name="spendLimitCreditMicros"
          inputMode="numeric"
          value={limit}
          onChange={(e) => setLimit(e.target.value)}
        />
      </Field>
      <Field label="Expires (UTC)" name="expiresAt" error={error} hint="Empty: never.">
        <input name="expiresAt" type="datetime-local" value={expires} onChange={(e) => setExpires(e.target.value)} />
      </Field>
      <FormBanner error={error} fields={fields} />
      <button type="submit" disabled={busy}>
        Create key
      </button>
    </form>
  );
}

export function KeysPage({ session }: { session: Session }) {
  const [keys, setKeys] = useState<KeyRow[] | undefined>();
  const [notice, setNotice] = useState<string | undefined>();
  const list = useAction();
  const reload = () =>
    list.run(async () => setKeys((await platform<{ data: KeyRow[] }>(session, 'GET', '/keys')).data));
  useEffect(() => void reload(), []);

  async function copy(k: KeyRow) {
    try {
      const { apiKey } = await platform<{ apiKey: string }>(session, 'POST', `/keys/${encodeURIComponent(k.id)}/copy`);
      await toClipboard(apiKey);
      setNotice(`Copied the key "${k.name}" to the clipboard.`);
    } catch (err) {
      setNotice(toFormError(err).message);
    }
  }

  async function revoke(k: KeyRow) {
    if (!confirm(`Revoke the key "${k.name}"? Calls made with it, and with keys minted under it, stop at once.`))
      return;
    try {
      await platform(session, 'POST', `/keys/${encodeURIComponent(k.id)}/revoke`);
      setNotice(`Revoked the key "${k.name}".`);
      await reload();
    } catch (err) {
      setNotice(toFormError(err).message);
    }
  }

  return (
    <>
      <h1>API keys</h1>
      {notice && (
        <p className="banner" role="status">
          {notice}
        </p>
      )}
      <CreateKey
        session={session}
        onCreated={(name) => {
          setNotice(`Created the key "${name}" and copied it to the clipboard. You can copy it again from the list.`);
          void reload();
        }}
      />
      <FormBanner error={list.error} fields={[]} />
      <table className="keys">
        <thead>
          <tr>
            <th>Name</th>
            <th>Key</th>
            <th>Scopes</th>
            <th>Status</th>
            <th>Spend limit</th>
            <th>Expires</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {keys?.map((k) => (
            <tr key={k.id} data-key-id={k.id}>
              <td>{k.name}</td>
              <td>
                <code>{k.redactedKey}</code>
              </td>
              <td>{k.scopes.join(', ')}</td>
              <td>{k.status}</td>
              <td>{k.spendLimitCreditMicros === null ? 'none' : formatCredits(k.spendLimitCreditMicros)}</td>
              <td>{formatDate(k.expiresAt)}</td>
              <td className="actions">
                {k.copyable ? (
                  <button onClick={() => void copy(k)}>Copy</button>
                ) : (
                  <span className="muted" title={k.notCopyableReason ?? ''}>
                    Cannot be copied: {k.notCopyableReason}
                  </span>
                )}
                {k.status === 'active' && (
                  <button className="danger" onClick={() => void revoke(k)}>
                    Revoke
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
