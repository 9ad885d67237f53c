import { EventEmitter } from 'node:events';
import {
  AudioSource,
  LocalAudioTrack,
  Room,
  RoomEvent,
  TrackPublishOptions,
  TrackSource,
  type RemoteTrack,
} from '@livekit/rtc-node';
import { AccessToken } from 'livekit-server-sdk';
import { afterEach, beforeEach, describe, expect, inject, it, vi } from 'vitest';
import { LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET } from '../test/deps.ts';
import { resubscribeStalledTracks } from './stalled-tracks.ts';

/** A publication as rtc-node holds it: its track (once subscribed) and the subscription requests made of it. */
class Publication {
  track: object | undefined;
  readonly requests: boolean[] = [];
  constructor(readonly sid: string) {}
  setSubscribed(on: boolean) {
    this.requests.push(on);
  }
}

function roomWith(participants: Record<string, Publication[]>): Room {
  const room = new EventEmitter() as EventEmitter & { remoteParticipants: Map<string, unknown> };
  room.remoteParticipants = new Map(
    Object.entries(participants).map(([identity, pubs]) => [
      identity,
      { identity, trackPublications: new Map(pubs.map((p) => [p.sid, p])) },
    ]),
  );
  return room as unknown as Room;
}

describe('resubscribeStalledTracks', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('asks again (off, then on) for a wanted publication still without its track after the stall time', () => {
    const video = new Publication('TR_video');
    const room = roomWith({ avatar: [video] });
    const told: unknown[] = [];
    resubscribeStalledTracks(room, { wanted: () => true, stallMs: 5000, onResubscribe: (i) => told.push(i) });
    // First seen at the first check (1 s in), off at the check 5 s later, on 200 ms after that.
    vi.advanceTimersByTime(5500);
    expect(video.requests, 'not before the stall time').toEqual([]);
    vi.advanceTimersByTime(600);
    expect(video.requests).toEqual([false]);
    vi.advanceTimersByTime(300);
    expect(video.requests).toEqual([false, true]);
    expect(told).toEqual([{ identity: 'avatar', trackSid: 'TR_video' }]);
  });

  it('leaves alone a publication whose track arrives, one it does not want, and one that gets its track between off and on', () => {
    const arrives = new Publication('TR_arrives');
    const unwanted = new Publication('TR_unwanted');
    const late = new Publication('TR_late');
    const room = roomWith({ avatar: [arrives, late], other: [unwanted] });
    resubscribeStalledTracks(room, { wanted: (_pub, p) => p.identity === 'avatar', stallMs: 5000 });
    vi.advanceTimersByTime(2000);
    arrives.track = {};
    // Off at the check 5 s after it was first seen (6 s in); on would follow 200 ms later.
    vi.advanceTimersByTime(4100);
    expect(arrives.requests).toEqual([]);
    expect(unwanted.requests).toEqual([]);
    expect(late.requests).toEqual([false]);
    late.track = {};
    vi.advanceTimersByTime(1000);
    expect(late.requests, 'its track came: not subscribed again').toEqual([false]);
  });

  it('stops watching when the room disconnects', () => {
    const video = new Publication('TR_video');
    const room = roomWith({ avatar: [video] });
    resubscribeStalledTracks(room, { wanted: () => true, stallMs: 2000 });
    (room as unknown as EventEmitter).emit(RoomEvent.Disconnected);
    vi.advanceTimersByTime(10_000);
    expect(video.requests).toEqual([]);
  });
});

describe('resubscribeStalledTracks, on the real LiveKit server', () => {
  const join = async (room: Room, name: string, identity: string, autoSubscribe: boolean) => {
    const token = new AccessToken(LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET, { identity });
    token.addGrant({ room: name, roomJoin: true, canPublish: true, canSubscribe: true });
    await room.connect(inject('livekitUrl'), await token.toJwt(), { autoSubscribe, dynacast: false });
  };

  it('gets a wanted track that has not come: the server sends it once asked for again', async () => {
    const name = `stalled-${Date.now()}`;
    const [publisher, viewer] = [new Room(), new Room()];
    try {
      await join(publisher, name, 'speaker', false);
      const source = new AudioSource(16_000, 1);
      await publisher.localParticipant!.publishTrack(
        LocalAudioTrack.createAudioTrack('mic', source),
        new TrackPublishOptions({ source: TrackSource.SOURCE_MICROPHONE }),
      );
      // Subscribed to nothing: the speaker's track is wanted and does not come, as after the SDK dropped it.
      const subscribed = new Promise<RemoteTrack>((resolve) => viewer.on(RoomEvent.TrackSubscribed, (t) => resolve(t)));
      await join(viewer, name, 'listener', false);
      const told: string[] = [];
      resubscribeStalledTracks(viewer, {
        wanted: (_pub, p) => p.identity === 'speaker',
        stallMs: 1000,
        onResubscribe: ({ identity }) => told.push(identity),
      });
      const track = await Promise.race([
        subscribed,
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no track in 10 s')), 10_000)),
      ]);
      expect(track.sid).toBeDefined();
      expect(told).toEqual(['speaker']);
    } finally {
      await viewer.disconnect();
      await publisher.disconnect();
    }
  }, 30_000);
});
