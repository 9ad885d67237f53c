import { Room, RoomEvent, Track, type RemoteTrack } from 'livekit-client';

/**
 * `<avatar-call>`: a live call with an avatar in any web page. The page's backend mints the session
 * with its API key (`POST /api/v1/realtime/livekit/session`: the key never reaches the browser) and
 * hands the page the mint's answer, the grant; set it as the element's `grant` property (or its
 * `grant` attribute, as JSON). The element joins the call with the microphone, shows the avatar with
 * its captions and a hang-up button, and leaves the call when hung up, removed or the page unloads:
 * the avatar then ends the session (`user_left`, billing stops). It fires `avatar-call-ended`
 * (`detail.sessionId`) so the page can tell its backend, which may release the session at once.
 *
 * Served ready to use by the platform at `/platform/embed.js` (a classic script that defines the element).
 */
export interface AvatarCallGrant {
  server_url: string;
  /** Null when the workspace limits calls to allowed origins: the element then redeems `join_token` at `join_url`. */
  participant_token: string | null;
  avatar_identity: string;
  session_id?: string;
  /** Single use: exchanged (from this page's origin) for the LiveKit token. */
  join_token?: string;
  join_url?: string;
}

/** What the element joins LiveKit with. */
type Joinable = Pick<AvatarCallGrant, 'server_url' | 'avatar_identity'> & { participant_token: string };

/** Why a join token was refused, in words for the page (the API's code names it). */
class JoinRefused extends Error {}

/**
 * The grant's LiveKit token, or, for a workspace that limits origins, the answer of its join URL
 * (POST { join_token }, no cookies: the token is the whole credential; the browser sends Origin).
 */
async function joinable(g: AvatarCallGrant): Promise<Joinable | undefined> {
  if (g.participant_token) return { ...g, participant_token: g.participant_token };
  if (!g.join_token || !g.join_url) return undefined;
  const res = await fetch(g.join_url, {
    method: 'POST',
    credentials: 'omit',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ join_token: g.join_token }),
  });
  if (res.status === 403) throw new JoinRefused("This page's origin is not allowed to join this call.");
  if (res.status === 404 || res.status === 410)
    throw new JoinRefused('This session cannot be joined any more: it was used, has expired or has ended.');
  if (!res.ok) throw new JoinRefused(`Could not join: the server answered ${res.status}.`);
  return (await res.json()) as Joinable;
}

const STYLE = `
:host { display: inline-block; font-family: system-ui, sans-serif; width: 360px; }
video { width: 100%; aspect-ratio: 1; background: #000; border-radius: 8px; display: block; }
audio { display: none; }
.bar { display: flex; justify-content: space-between; align-items: center; margin: 6px 0; font-size: 14px; }
button { font: inherit; padding: 4px 12px; border-radius: 4px; border: 1px solid #b42318; background: #fff; color: #b42318; cursor: pointer; }
ul { list-style: none; padding: 0; margin: 0; font-size: 14px; max-height: 8em; overflow: auto; }
.you { color: #667085; }
`;

export class AvatarCallElement extends HTMLElement {
  private room: Room | undefined;
  private currentGrant: AvatarCallGrant | undefined;
  private readonly root: ShadowRoot;
  private readonly stage: HTMLDivElement;
  private readonly status: HTMLSpanElement;
  private readonly captions: HTMLUListElement;
  private readonly hangUpButton: HTMLButtonElement;
  private readonly onHide = () => void this.hangUp();

  constructor() {
    super();
    this.root = this.attachShadow({ mode: 'open' });
    const style = document.createElement('style');
    style.textContent = STYLE;
    this.stage = document.createElement('div');
    const bar = document.createElement('div');
    bar.className = 'bar';
    this.status = document.createElement('span');
    this.status.setAttribute('role', 'status');
    this.hangUpButton = document.createElement('button');
    this.hangUpButton.textContent = 'Hang up';
    this.hangUpButton.addEventListener('click', () => void this.hangUp());
    bar.append(this.status, this.hangUpButton);
    this.captions = document.createElement('ul');
    this.root.append(style, this.stage, bar, this.captions);
  }

  /** The mint's answer. Setting it joins the call (once the element is in the page). */
  get grant(): AvatarCallGrant | undefined {
    return this.currentGrant;
  }

  set grant(g: AvatarCallGrant | undefined) {
    this.currentGrant = g;
    if (g && this.isConnected) void this.start();
  }

  /** `connecting`, `live`, `ended` or `idle`. */
  get state(): string {
    return this.getAttribute('state') ?? 'idle';
  }

  connectedCallback(): void {
    addEventListener('pagehide', this.onHide);
    const attr = this.getAttribute('grant');
    if (!this.currentGrant && attr) this.currentGrant = JSON.parse(attr) as AvatarCallGrant;
    if (this.currentGrant) void this.start();
    else this.setState('idle', 'Waiting for a session…');
  }

  disconnectedCallback(): void {
    removeEventListener('pagehide', this.onHide);
    void this.hangUp();
  }

  private setState(state: string, text: string): void {
    this.setAttribute('state', state);
    this.status.textContent = text;
    // Nothing to hang up before a call or after it.
    this.hangUpButton.hidden = state !== 'connecting' && state !== 'live';
  }

  private caption(id: string, who: 'you' | 'avatar', text: string): void {
    let li = this.captions.querySelector<HTMLLIElement>(`li[data-id="${CSS.escape(id)}"]`);
    if (!li) {
      li = document.createElement('li');
      li.dataset.id = id;
      li.className = who;
      this.captions.append(li);
    }
    li.textContent = `${who === 'you' ? 'You' : 'Avatar'}: ${text}`;
    li.scrollIntoView({ block: 'nearest' });
  }

  private async start(): Promise<void> {
    const grant = this.currentGrant;
    if (!grant || this.room || this.state === 'connecting') return;
    this.setState('connecting', 'Joining…');
    let g: Joinable | undefined;
    try {
      g = await joinable(grant);
    } catch (err) {
      const text =
        err instanceof JoinRefused
          ? err.message
          : `Could not join: ${err instanceof Error ? err.message : String(err)}`;
      return this.setState('ended', text);
    }
    if (!g) return this.setState('ended', 'This session has no token for a user to join with.');
    // The grant was replaced or the element removed while the join was answered: start over, if at all.
    if (this.currentGrant !== grant || !this.isConnected) {
      this.setState('idle', 'Waiting for a session…');
      if (this.currentGrant && this.isConnected) void this.start();
      return;
    }
    const room = new Room({ adaptiveStream: false, dynacast: false });
    this.room = room;
    room.on(RoomEvent.TrackSubscribed, (track: RemoteTrack, _pub, p) => {
      if (p.identity !== g.avatar_identity) return;
      this.stage.append(track.attach());
      if (track.kind === Track.Kind.Video) this.setState('live', 'In the call');
    });
    room.on(RoomEvent.Disconnected, () => this.ended());
    room.registerTextStreamHandler('lk.transcription', (reader, { identity }) => {
      const who = identity === room.localParticipant.identity ? 'you' : 'avatar';
      const id = `${who}:${reader.info.attributes?.['lk.segment_id'] ?? reader.info.id}`;
      void (async () => {
        let text = '';
        for await (const chunk of reader) {
          text += chunk;
          if (text.trim()) this.caption(id, who, text.trim());
        }
      })().catch(() => undefined);
    });
    try {
      await room.connect(g.server_url, g.participant_token, { autoSubscribe: true });
      await room.localParticipant.setMicrophoneEnabled(true);
    } catch (err) {
      this.setState('ended', `Could not join: ${err instanceof Error ? err.message : String(err)}`);
      await this.hangUp();
    }
  }

  /** Leaves the call (the avatar ends the session as the user left). */
  async hangUp(): Promise<void> {
    const room = this.room;
    this.room = undefined;
    await room?.disconnect();
    if (room) this.ended();
  }

  private ended(): void {
    if (this.state === 'ended') return;
    for (const el of [...this.stage.children]) el.remove();
    this.setState('ended', 'The call has ended.');
    this.dispatchEvent(
      new CustomEvent('avatar-call-ended', { detail: { sessionId: this.currentGrant?.session_id }, bubbles: true }),
    );
  }
}

/** Defines `<avatar-call>` (or another tag name) once. */
export function defineAvatarCall(name = 'avatar-call'): void {
  if (!customElements.get(name)) customElements.define(name, AvatarCallElement);
}
