/**
 * How the voice job takes the user's audio: at 16 kHz (what the VADs and the STT use, so nothing
 * resamples it again in JavaScript) in 30 ms frames instead of rtc-node's 10 ms.
 *
 * Every frame is an FFI event (a protobuf decode), then a hop through WHATWG streams into each of
 * the two VADs and the STT: at 10 ms frames the job's main thread was never idle during a call, and
 * the VADs, the first clause's TTS and the reply's data stream all waited on it. With 30 ms frames
 * at 16 kHz the job used 220 ms of CPU a second against 354 (`npm run bench -- conversation`, side
 * by side). agents-js 1.9 has no option for the frame size: its room input opens the stream in
 * `createStream`, which is replaced here for the job process, and a stream opened before that is
 * reopened. If a later agents-js moves those internals, the input stays as agents-js makes it (10 ms
 * frames) and a warning says so.
 */
import type { voice } from '@livekit/agents';
import { AudioStream, type RemoteTrack, type RemoteTrackPublication } from '@livekit/rtc-node';
import type { Logger } from '../../core/platform/log.ts';

export const USER_AUDIO_SAMPLE_RATE = 16_000;

/** The parts of agents-js's ParticipantAudioInputStream (room_io/_input) used here. */
interface RoomAudioInput {
  sampleRate: number;
  numChannels: number;
  track: RemoteTrack | null;
  publication: RemoteTrackPublication | null;
  updateStream(track: RemoteTrack | null, publication: RemoteTrackPublication | null): void;
  createStream(track: RemoteTrack): ReadableStream;
}

const LARGER_FRAMES = Symbol('avatar.userAudioFrames');

function isRoomAudioInput(input: unknown): input is RoomAudioInput {
  const i = input as Partial<RoomAudioInput> | null;
  return (
    typeof i?.createStream === 'function' &&
    typeof i.updateStream === 'function' &&
    typeof i.sampleRate === 'number' &&
    typeof i.numChannels === 'number' &&
    'track' in i &&
    'publication' in i
  );
}

/**
 * Call after `AgentSession.start`: the session's room audio input opens its streams with frames of
 * `frameMs` from now on (10: left as agents-js makes it). One size per process (a job process runs one call).
 */
export function takeUserAudioInFrames(session: voice.AgentSession, frameMs: number, log: Logger): boolean {
  if (frameMs === 10) return false;
  const input: unknown = session.input.audio;
  if (!isRoomAudioInput(input)) {
    log.warn('the room audio input is not the one this agents-js version had: the user audio stays in 10 ms frames');
    return false;
  }
  const proto = Object.getPrototypeOf(input) as RoomAudioInput & { [LARGER_FRAMES]?: true };
  if (!proto[LARGER_FRAMES]) {
    proto[LARGER_FRAMES] = true;
    proto.createStream = function (this: RoomAudioInput, track: RemoteTrack) {
      return new AudioStream(track, {
        sampleRate: this.sampleRate,
        numChannels: this.numChannels,
        frameSizeMs: frameMs,
      });
    };
  }
  // The user's track may already be open (they joined first): open it again, in the larger frames.
  if (input.track && input.publication) input.updateStream(input.track, input.publication);
  return true;
}
