import { useEffect, useState, type FormEvent } from 'react';
import type { Avatar, Schemas } from '../../client/index.ts';
import { apiClient, type Session } from '../api.ts';
import { Field, FormBanner, formatDate, useAction } from '../ui.tsx';

type ClipLibrary = Schemas['ClipLibrary'];
const avatarHref = (id: string) => `/platform/dashboard/avatars/${encodeURIComponent(id)}`;

function CreateAvatar({ session }: { session: Session }) {
  const [displayName, setDisplayName] = useState('');
  const [file, setFile] = useState<File | undefined>();
  const { busy, error, setError, run } = useAction();
  function submit(e: FormEvent) {
    e.preventDefault();
    void run(async () => {
      if (!file) {
        setError({
          field: 'file',
          message: 'Choose a portrait (JPEG, PNG or WebP) of one face, looking at the camera.',
        });
        return;
      }
      const client = apiClient(session);
      const asset = await client.assets
        .upload({ file, filename: file.name, kind: 'image' })
        .catch((err: unknown) =>
          Promise.reject(Object.assign(err as object, { field: (err as { field?: string }).field ?? 'file' })),
        );
      const avatar = await client.avatars.create({ displayName, sourceKind: 'image', sourceAssetId: asset.id });
      location.assign(avatarHref(avatar.id));
    });
  }
  return (
    <form className="card" onSubmit={submit} aria-label="Create an avatar">
      <h2>Create an avatar</h2>
      <Field label="Name" name="displayName" error={error}>
        <input name="displayName" value={displayName} onChange={(e) => setDisplayName(e.target.value)} />
      </Field>
      <Field label="Portrait" name="file" error={error}>
        <input
          name="file"
          type="file"
          accept="image/jpeg,image/png,image/webp"
          onChange={(e) => setFile(e.target.files?.[0])}
        />
      </Field>
      <FormBanner error={error} fields={['displayName', 'file', 'sourceAssetId']} />
      <button type="submit" disabled={busy}>
        {busy ? 'Uploading…' : 'Create avatar'}
      </button>
    </form>
  );
}

export function AvatarsPage({ session }: { session: Session }) {
  const [avatars, setAvatars] = useState<Avatar[] | undefined>();
  const { error, run } = useAction();
  useEffect(() => void run(async () => setAvatars((await apiClient(session).avatars.list()).data as Avatar[])), []);
  return (
    <>
      <h1>Avatars</h1>
      <FormBanner error={error} fields={[]} />
      <ul className="avatars">
        {avatars?.map((a) => (
          <li key={a.id}>
            <a href={avatarHref(a.id)}>{a.displayName}</a> <span className={`status ${a.status}`}>{a.status}</span>{' '}
            <span className="muted">{formatDate(a.createdAt)}</span>
          </li>
        ))}
      </ul>
      {avatars?.length === 0 && <p className="muted">No avatars yet.</p>}
      <CreateAvatar session={session} />
    </>
  );
}

/** Where generation stands, in words a user reads while waiting. */
function progress(a: Avatar): string {
  if (a.status === 'failed') return `Failed: ${a.error ?? 'unknown reason'}`;
  if (a.status === 'ready' && a.idleVideoStatus === 'ready') return 'Ready';
  if (a.status === 'ready') return `Ready (a new idle loop is ${a.idleVideoStatus})`;
  return `Generating the idle loop: ${a.idleVideoStatus}…`;
}

const settling = (a: Avatar) =>
  a.status === 'draft' ||
  a.status === 'preprocessing' ||
  a.idleVideoStatus === 'queued' ||
  a.idleVideoStatus === 'generating' ||
  a.motionLibrary.some((c) => c.status === 'queued' || c.status === 'rendering');

function Persona({ session, avatar, onSaved }: { session: Session; avatar: Avatar; onSaved: (a: Avatar) => void }) {
  const [personality, setPersonality] = useState(avatar.personality ?? '');
  const [greeting, setGreeting] = useState(String(avatar.settings.greeting ?? ''));
  const [voice, setVoice] = useState(avatar.defaultVoiceId ?? '');
  const { busy, error, run } = useAction();
  const [saved, setSaved] = useState(false);
  function submit(e: FormEvent) {
    e.preventDefault();
    setSaved(false);
    void run(async () => {
      const settings = { ...avatar.settings };
      if (greeting === '') delete settings.greeting;
      else settings.greeting = greeting;
      const a = await apiClient(session).avatars.update(avatar.id, {
        personality: personality === '' ? null : personality,
        defaultVoiceId: voice === '' ? null : voice,
        settings,
      });
      onSaved(a as Avatar);
      setSaved(true);
    });
  }
  return (
    <form className="card" onSubmit={submit} aria-label="Persona">
      <h2>Persona, greeting and voice</h2>
      <Field label="Personality (its instructions)" name="personality" error={error}>
        <textarea name="personality" rows={4} value={personality} onChange={(e) => setPersonality(e.target.value)} />
      </Field>
      <Field label="Greeting (said as the user joins a call)" name="settings.greeting" error={error}>
        <input name="greeting" value={greeting} onChange={(e) => setGreeting(e.target.value)} />
      </Field>
      <Field
        label="Voice"
        name="defaultVoiceId"
        error={error}
        hint="A voice of the TTS model; empty: the default voice."
      >
        <input name="defaultVoiceId" value={voice} onChange={(e) => setVoice(e.target.value)} />
      </Field>
      <FormBanner error={error} fields={['personality', 'settings', 'defaultVoiceId']} />
      <button type="submit" disabled={busy}>
        Save
      </button>
      {saved && <span className="muted"> Saved.</span>}
    </form>
  );
}

function RedirectLoop({ session, avatar, onSaved }: { session: Session; avatar: Avatar; onSaved: () => void }) {
  const [prompt, setPrompt] = useState(avatar.motionPrompt ?? '');
  const { busy, error, run } = useAction();
  function submit(e: FormEvent) {
    e.preventDefault();
    void run(async () => {
      await apiClient(session).avatars.redirectLoop(avatar.id, { motionPrompt: prompt });
      onSaved();
    });
  }
  return (
    <form className="card" onSubmit={submit} aria-label="Re-direct the loop">
      <h2>Re-direct the idle loop</h2>
      <Field label="Motion prompt" name="motionPrompt" error={error}>
        <input
          name="motionPrompt"
          value={prompt}
          onChange={(e) => setPrompt(e.target.value)}
          placeholder="smile softly, blink"
        />
      </Field>
      <FormBanner error={error} fields={['motionPrompt']} />
      <button type="submit" disabled={busy}>
        Generate a new loop
      </button>
    </form>
  );
}

/** The declaration a PUT replaces: the generated clips' prompts and the behaviour, as editable JSON. */
function declarationOf(lib: ClipLibrary): string {
  const clips = Object.fromEntries(
    lib.data
      .filter((c) => c.source === 'generated' && c.motionPrompt)
      .map((c) => [c.clipId, { source: { motionPrompt: c.motionPrompt } }]),
  );
  return JSON.stringify({ clips, ...lib.behavior }, null, 2);
}

function ClipLibraryEditor({ session, avatarId }: { session: Session; avatarId: string }) {
  const [lib, setLib] = useState<ClipLibrary | undefined>();
  const [text, setText] = useState('');
  const [saved, setSaved] = useState<string | undefined>();
  const { busy, error, setError, run } = useAction();
  const load = () =>
    run(async () => {
      const l = await apiClient(session).avatars.clips(avatarId);
      setLib(l);
      setText(declarationOf(l));
    });
  useEffect(() => void load(), [avatarId]);
  function submit(e: FormEvent) {
    e.preventDefault();
    setSaved(undefined);
    void run(async () => {
      let declaration: Record<string, unknown>;
      try {
        declaration = JSON.parse(text) as Record<string, unknown>;
      } catch (err) {
        setError({ field: 'declaration', message: `Not JSON: ${(err as Error).message}` });
        return;
      }
      await apiClient(session).avatars.putClips(avatarId, {
        ...(declaration as object),
        expectedRevision: lib?.revision ?? 0,
      } as never);
      setSaved('Accepted: the clips render in the background.');
      await load();
    });
  }
  // The API names the offending field of the declaration (e.g. clips.nod.source.motionPrompt).
  const fieldError = error?.field ? error : undefined;
  return (
    <form className="card" onSubmit={submit} aria-label="Clip library">
      <h2>Clip library</h2>
      {lib && !lib.clipLibraryEligible && (
        <p className="muted">The clip library is off for this workspace or avatar (an operator switches it on).</p>
      )}
      <ul className="clips">
        {lib?.data.map((c) => (
          <li key={c.clipId}>
            <strong>{c.clipId}</strong> <span className={`status ${c.status}`}>{c.status}</span>
            {c.url && <video className="clip" src={c.url} controls muted playsInline preload="metadata" />}
          </li>
        ))}
      </ul>
      <div className={fieldError ? 'field invalid' : 'field'}>
        <label>
          <span className="label">Declaration (JSON: clips, idle, on, actions)</span>
          <textarea
            name="declaration"
            rows={12}
            spellCheck={false}
            value={text}
            onChange={(e) => setText(e.target.value)}
          />
        </label>
        {fieldError && (
          <div className="field-error" role="alert" data-field={fieldError.field ?? ''}>
            <code>{fieldError.field}</code>: {fieldError.message}
          </div>
        )}
      </div>
      {error && !error.field && (
        <div className="banner error" role="alert">
          {error.message}
        </div>
      )}
      <button type="submit" disabled={busy}>
        Save declaration
      </button>
      {saved && <span className="muted"> {saved}</span>}
    </form>
  );
}

export function AvatarPage({ session, avatarId }: { session: Session; avatarId: string }) {
  const [avatar, setAvatar] = useState<Avatar | undefined>();
  const [tick, setTick] = useState(0);
  const { error, run } = useAction();
  useEffect(() => void run(async () => setAvatar(await apiClient(session).avatars.get(avatarId))), [avatarId, tick]);
  // While it generates, look again every 3 s (well within the per-key rate limit).
  useEffect(() => {
    if (!avatar || !settling(avatar)) return;
    const t = setTimeout(() => setTick((n) => n + 1), 3000);
    return () => clearTimeout(t);
  }, [avatar]);
  if (!avatar) return <FormBanner error={error} fields={[]} />;
  return (
    <>
      <p>
        <a href="/platform/dashboard/avatars">← Avatars</a>
      </p>
      <h1>{avatar.displayName}</h1>
      <p className="progress" data-status={avatar.status} data-idle={avatar.idleVideoStatus} role="status">
        {progress(avatar)}
      </p>
      {avatar.servingUrl && (
        <video
          className="loop"
          src={avatar.servingUrl}
          autoPlay
          loop
          muted
          playsInline
          controls
          aria-label="Idle loop"
        />
      )}
      {avatar.status === 'ready' && (
        <p>
          <a className="button" href={`${avatarHref(avatar.id)}/playground`}>
            Talk to it in the playground
          </a>
        </p>
      )}
      {avatar.motionLibrary.length > 0 && (
        <p className="muted">Motion clips: {avatar.motionLibrary.map((c) => `${c.clipId} (${c.status})`).join(', ')}</p>
      )}
      <Persona session={session} avatar={avatar} onSaved={setAvatar} />
      {avatar.status === 'ready' && (
        <RedirectLoop session={session} avatar={avatar} onSaved={() => setTick((n) => n + 1)} />
      )}
      {avatar.status === 'ready' && <ClipLibraryEditor session={session} avatarId={avatar.id} />}
    </>
  );
}
