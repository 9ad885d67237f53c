/**
 * A remote track that never arrives, asked for again. rtc-node's Rust SDK drops a track whose
 * publication it has not heard of within 5 s of the track's media arriving (it logs "could not find
 * published track with sid" and nothing else): the publication then stays without a track for the
 * rest of the call, and a viewer sees nothing, or the avatar hears nothing. Seen once on a busy CI
 * machine. Subscribing off and on makes the server send the track anew, by which time the
 * publication is known.
 */
import { RoomEvent, type RemoteParticipant, type RemoteTrackPublication, type Room } from '@livekit/rtc-node';

export interface StalledTrackOptions {
  /** The publications the caller subscribes to (or the server subscribes it to). */
  wanted: (pub: RemoteTrackPublication, participant: RemoteParticipant) => boolean;
  /** How long a wanted publication may go without its track before it is asked for again, ms. */
  stallMs?: number;
  /** Told each time a publication is asked for again. */
  onResubscribe?: (info: { identity: string; trackSid: string | undefined }) => void;
}

/** How often publications are looked at, ms. */
const CHECK_EVERY_MS = 1000;
/** Between subscribing off and on: the server has then dropped its side of the first subscription. */
const OFF_ON_GAP_MS = 200;

/** A request to a room that may be closing: it then has nothing left to ask for. */
function subscribe(pub: RemoteTrackPublication, on: boolean): void {
  try {
    pub.setSubscribed(on);
  } catch {
    // The room is gone: so is the track.
  }
}

/** Watches `room` until it disconnects (or the returned function is called). */
export function resubscribeStalledTracks(room: Room, opts: StalledTrackOptions): () => void {
  const stallMs = opts.stallMs ?? 8000;
  const trackless = new Map<RemoteTrackPublication, number>();
  const timers = new Set<NodeJS.Timeout>();
  const check = () => {
    const now = performance.now();
    const seen = new Set<RemoteTrackPublication>();
    for (const p of room.remoteParticipants.values())
      for (const pub of p.trackPublications.values()) {
        if (pub.track || !opts.wanted(pub, p)) continue;
        seen.add(pub);
        const since = trackless.get(pub);
        if (since === undefined) {
          trackless.set(pub, now);
        } else if (now - since >= stallMs) {
          trackless.set(pub, now);
          opts.onResubscribe?.({ identity: p.identity, trackSid: pub.sid });
          subscribe(pub, false);
          const t = setTimeout(() => {
            timers.delete(t);
            if (!pub.track) subscribe(pub, true);
          }, OFF_ON_GAP_MS);
          timers.add(t);
        }
      }
    for (const pub of trackless.keys()) if (!seen.has(pub)) trackless.delete(pub);
  };
  const interval = setInterval(check, CHECK_EVERY_MS);
  interval.unref();
  const stop = () => {
    clearInterval(interval);
    for (const t of timers) clearTimeout(t);
    timers.clear();
    room.off(RoomEvent.Disconnected, stop);
  };
  room.on(RoomEvent.Disconnected, stop);
  return stop;
}
