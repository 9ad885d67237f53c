import {
  AudioFrame,
  AudioSource,
  LocalAudioTrack,
  Room,
  RoomEvent,
  TrackKind,
  TrackPublishOptions,
  TrackSource,
  type RemoteTrack,
} from '@livekit/rtc-node';
import { RoomServiceClient } from 'livekit-server-sdk';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createLogger } from '../../core/platform/log.ts';
import { waitFor } from '../../test/helpers.ts';
import { DEV_KEY, DEV_SECRET, token } from '../test-support.ts';
import { UserAudio } from './user-audio.ts';

const url = inject('livekitUrl');
const rooms = new RoomServiceClient(url.replace(/^ws/, 'http'), DEV_KEY, DEV_SECRET);
const opened: Room[] = [];
afterAll(async () => {
  for (const r of opened) await r.disconnect().catch(() => {});
});

describe('the user audio the avatar hears', () => {
  // A call whose room is deleted (released, LiveKit gone) ends as `room_closed` and closes its user
  // audio: that close must return, or the call's end (its report, its recording) and a worker's
  // drain wait on it forever.
  it(
    'closes once its room is gone, though no frame and no end of stream come any more',
    { timeout: 20_000 },
    async () => {
      const roomName = `user-audio-${Date.now()}`;
      await rooms.createRoom({ name: roomName });
      const user = new Room();
      const avatar = new Room();
      opened.push(user, avatar);
      const subscribed = new Promise<RemoteTrack>((resolve) =>
        avatar.on(RoomEvent.TrackSubscribed, (track) => track.kind === TrackKind.KIND_AUDIO && resolve(track)),
      );
      await avatar.connect(url, await token(roomName, 'avatar'), { autoSubscribe: true, dynacast: false });
      await user.connect(url, await token(roomName, 'user'), { autoSubscribe: false, dynacast: false });
      const source = new AudioSource(24_000, 1, 100);
      await user.localParticipant!.publishTrack(
        LocalAudioTrack.createAudioTrack('mic', source),
        new TrackPublishOptions({ source: TrackSource.SOURCE_MICROPHONE }),
      );
      let frames = 0;
      const audio = new UserAudio({
        track: await subscribed,
        sampleRate: 24_000,
        vad: null,
        log: createLogger('silent'),
        onSpeechStarted: () => {},
        onAudio: () => frames++,
      });
      const tone = new Int16Array(240).map((_, i) => Math.round(3000 * Math.sin(i / 5)));
      for (let ms = 0; ms < 500; ms += 10) await source.captureFrame(new AudioFrame(tone, 24_000, 1, tone.length));
      await waitFor('the user heard', () => (frames > 10 ? true : undefined));

      const gone = new Promise<void>((resolve) => avatar.once(RoomEvent.Disconnected, () => resolve()));
      await rooms.deleteRoom(roomName);
      await gone;
      await expect(audio.close()).resolves.toBeUndefined();
    },
  );
});
