import { Room, RoomEvent, Track, type RemoteTrack } from 'livekit-client';
import { useEffect, useRef, useState } from 'react';
import type { MintGrant } from '../../client/index.ts';
import { apiClient, releaseOnUnload, type Session } from '../api.ts';
import { FormBanner, toFormError, type FormError } from '../ui.tsx';
import { AllowedOrigins } from './allowed-origins.tsx';
import { TurnPlayer } from './turn-player.tsx';

type Phase = 'idle' | 'minting' | 'queued' | 'connecting' | 'live' | 'ended';
interface Caption {
  id: string;
  who: 'you' | 'avatar';
  text: string;
}

/** The loudest sample of `analyser`'s last window, 0 to 1: how loud the avatar is now. */
function peak(analyser: AnalyserNode, buf: Float32Array<ArrayBuffer>): number {
  analyser.getFloatTimeDomainData(buf);
  let max = 0;
  for (const v of buf) max = Math.max(max, Math.abs(v));
  return max;
}

/** What a call shows: the avatar's tracks, both sides' captions, its end. */
interface CallView {
  track(track: RemoteTrack): void;
  caption(c: Caption): void;
  ended(): void;
}

/** Joins the minted call's room with the microphone on. */
async function joinCall(g: MintGrant, view: CallView): Promise<Room> {
  if (!g.participant_token) throw new Error('The session was minted without a token for a user to join with');
  const r = new Room({ adaptiveStream: false, dynacast: false });
  r.on(RoomEvent.TrackSubscribed, (track, _pub, p) => {
    if (p.identity === g.avatar_identity) view.track(track);
  });
  r.on(RoomEvent.Disconnected, view.ended);
  // One stream per transcript: the user's interim and final results (one segment: the final
  // replaces the interim), the avatar's reply as it is said.
  r.registerTextStreamHandler('lk.transcription', (reader, { identity }) => {
    const who = identity === r.localParticipant.identity ? 'you' : 'avatar';
    const id = `${who}:${reader.info.attributes?.['lk.segment_id'] ?? reader.info.id}`;
    void (async () => {
      let text = '';
      for await (const chunk of reader) {
        text += chunk;
        if (text.trim()) view.caption({ id, who, text: text.trim() });
      }
    })().catch(() => undefined);
  });
  await r.connect(g.server_url, g.participant_token, { autoSubscribe: true });
  await r.localParticipant.setMicrophoneEnabled(true);
  return r;
}

/** The snippet a tenant pastes in a page of its own: the element, and a grant its backend mints with its key. */
function EmbedSnippet({ avatarId }: { avatarId: string }) {
  const snippet = `<script src="${location.origin}/platform/embed.js"></script>
<avatar-call id="avatar"></avatar-call>
<script>
  // Your backend mints the session with its API key (never sent to the browser):
  //   POST ${location.origin}/api/v1/realtime/livekit/session  {"avatar_id": "${avatarId}"}
  // and answers this page with the mint's JSON (the grant).
  fetch('/your-backend/avatar-session', { method: 'POST' })
    .then((r) => r.json())
    .then((grant) => (document.getElementById('avatar').grant = grant));
  document.getElementById('avatar').addEventListener('avatar-call-ended', (e) => {
    // Optional: have your backend release e.detail.sessionId at once.
  });
</script>`;
  return (
    <section className="card">
      <h2>Embed it in your site</h2>
      <p className="muted">
        A web component: your page shows the avatar, its captions and a hang-up; leaving the page ends the call.
      </p>
      <pre className="snippet" data-testid="embed-snippet">
        {snippet}
      </pre>
      <button onClick={() => void navigator.clipboard.writeText(snippet)}>Copy the snippet</button>
    </section>
  );
}

const PHASE_TEXT: Record<Phase, string> = {
  idle: 'Not in a call.',
  minting: 'Starting the call…',
  queued: 'Every avatar slot is busy: waiting in line…',
  connecting: 'Joining…',
  live: 'In the call: speak.',
  ended: 'The call has ended.',
};

function PhaseText({ phase, queue }: { phase: Phase; queue: number | undefined }) {
  return (
    <p role="status">
      {phase === 'queued' && queue !== undefined ? `${PHASE_TEXT.queued} (${queue} waiting)` : PHASE_TEXT[phase]}
    </p>
  );
}

function Captions({ captions }: { captions: Caption[] }) {
  return (
    <ul className="captions">
      {captions.map((c) => (
        <li key={c.id} className={`caption ${c.who}`}>
          <strong>{c.who === 'you' ? 'You' : 'Avatar'}:</strong> {c.text}
        </li>
      ))}
    </ul>
  );
}

/**
 * Talk to the avatar live: the page mints a session (as the signed-in session, through the client
 * library), joins its LiveKit room with livekit-client, publishes the microphone, shows the avatar's
 * video and plays its voice, shows both sides' captions from the transcription streams, and hangs up
 * (the session is released: billing stops). Leaving the page releases it too.
 */
export function PlaygroundPage({ session, avatarId }: { session: Session; avatarId: string }) {
  const [phase, setPhase] = useState<Phase>('idle');
  const [error, setError] = useState<FormError | undefined>();
  const [queue, setQueue] = useState<number | undefined>();
  const [captions, setCaptions] = useState<Caption[]>([]);
  const [level, setLevel] = useState(0);
  const [grant, setGrant] = useState<MintGrant | undefined>();
  const stage = useRef<HTMLDivElement>(null);
  const room = useRef<Room | undefined>(undefined);
  const audio = useRef<AudioContext | undefined>(undefined);

  useEffect(() => () => void hangUp(), []);

  function caption(c: Caption) {
    setCaptions((all) => [...all.filter((x) => x.id !== c.id), c].slice(-12));
  }

  function listen(track: RemoteTrack) {
    const ctx = (audio.current ??= new AudioContext());
    const analyser = ctx.createAnalyser();
    analyser.fftSize = 1024;
    ctx.createMediaStreamSource(new MediaStream([track.mediaStreamTrack])).connect(analyser);
    const buf = new Float32Array(analyser.fftSize);
    const timer = setInterval(() => setLevel(peak(analyser, buf)), 100);
    track.once('ended', () => clearInterval(timer));
  }

  async function start() {
    setError(undefined);
    setCaptions([]);
    setPhase('minting');
    try {
      const g = await apiClient(session).live.mintWithQueue(
        { avatar_id: avatarId, max_duration_seconds: 300 },
        { onQueued: (q) => (setPhase('queued'), setQueue(q.queueSize)) },
      );
      setGrant(g);
      releaseOnUnload(session, g.session_id);
      setPhase('connecting');
      room.current = await joinCall(g, {
        track: (track) => {
          const el = track.attach();
          el.className = track.kind === Track.Kind.Video ? 'avatar-video' : 'avatar-audio';
          stage.current?.appendChild(el);
          if (track.kind === Track.Kind.Audio) listen(track);
          if (track.kind === Track.Kind.Video) setPhase('live');
        },
        caption,
        ended: () => setPhase('ended'),
      });
    } catch (err) {
      setError(toFormError(err));
      await hangUp();
    }
  }

  async function hangUp() {
    const r = room.current;
    room.current = undefined;
    await r?.disconnect();
    await audio.current?.close().catch(() => undefined);
    audio.current = undefined;
    for (const el of [...(stage.current?.children ?? [])]) el.remove();
    setGrant((g) => {
      if (g)
        void apiClient(session)
          .live.release({ session_id: g.session_id })
          .catch(() => undefined);
      return undefined;
    });
    setPhase((p) => (p === 'idle' ? 'idle' : 'ended'));
  }

  const inCall = phase === 'minting' || phase === 'queued' || phase === 'connecting' || phase === 'live';
  return (
    <>
      <p>
        <a href={`/platform/dashboard/avatars/${encodeURIComponent(avatarId)}`}>← The avatar</a>
      </p>
      <h1>Playground</h1>
      <p className="muted">
        Talk to the avatar with your microphone. The call is billed per second of the avatar on air, like any call.
      </p>
      <FormBanner error={error} fields={[]} />
      <div className="playground" data-phase={phase} data-session={grant?.session_id ?? ''}>
        <div className="stage" ref={stage} />
        <div className="meter" data-testid="avatar-level" data-level={level.toFixed(3)}>
          <span style={{ width: `${Math.min(100, level * 200)}%` }} />
        </div>
        <PhaseText phase={phase} queue={queue} />
        {inCall ? (
          <button className="danger" onClick={() => void hangUp()}>
            Hang up
          </button>
        ) : (
          <button onClick={() => void start()}>Start a call</button>
        )}
        <Captions captions={captions} />
      </div>
      <TurnPlayer session={session} avatarId={avatarId} />
      <EmbedSnippet avatarId={avatarId} />
      <AllowedOrigins session={session} />
    </>
  );
}
