/** Records yielded by `readAvatarMux`, in stream order: one header, then media and events, then end or error. */

export type AudioCodec = 'pcm_s16le' | 'opus' | (string & {});
export type VideoCodec = 'jpeg' | 'i420' | (string & {});

export interface AudioTrack {
  /** Index in the header's track table; media records name their track by it. */
  id: number;
  kind: 'audio';
  codec: AudioCodec;
  codecId: number;
  /** Samples per second per channel. In version 1 this always equals the stream's clock rate. */
  sampleRate: number;
  channels: number;
}

export interface VideoTrack {
  id: number;
  kind: 'video';
  codec: VideoCodec;
  codecId: number;
  width: number;
  height: number;
  /** Nominal frames per second, fpsNum / fpsDen (25/1, 30000/1001). */
  fps: number;
  fpsNum: number;
  fpsDen: number;
}

/** A track of a kind this reader does not know (added by a later minor version); its records are skipped. */
export interface UnknownTrack {
  id: number;
  kind: 'unknown';
  kindId: number;
  codecId: number;
}

export type MuxTrack = AudioTrack | VideoTrack | UnknownTrack;

export interface MuxHeader {
  type: 'header';
  version: { major: number; minor: number };
  /** The timeline clock, in ticks per second: the audio sample rate. Every `pts` counts these ticks. */
  clockRate: number;
  tracks: MuxTrack[];
  /** Free-form JSON object from the server (e.g. `turn_id`, `avatar_id`); `{}` when none. */
  metadata: Record<string, unknown>;
}

export interface MuxAudioChunk {
  type: 'audio';
  track: number;
  codec: AudioCodec;
  /** Index of the chunk's first sample on the audio clock. Audio is contiguous: pts = previous pts + previous sampleCount. */
  pts: number;
  /** pts in seconds. */
  time: number;
  /** Samples per channel in this chunk. */
  sampleCount: number;
  /** sampleCount in seconds. */
  duration: number;
  /** Codec data (interleaved s16le samples for pcm_s16le, one packet for opus). */
  data: Uint8Array;
  /** For pcm_s16le: the samples, interleaved by channel, in host order. */
  pcm?: Int16Array;
}

export interface MuxVideoFrame {
  type: 'video';
  track: number;
  codec: VideoCodec;
  /** Presentation time on the audio clock, in samples: show this frame when playback reaches this sample. */
  pts: number;
  /** pts in seconds. */
  time: number;
  /** 0-based count of frames of this track so far. */
  index: number;
  keyframe: boolean;
  width: number;
  height: number;
  /** A complete JPEG (jpeg) or the Y, U and V planes one after the other (i420). */
  data: Uint8Array;
}

export interface MuxEvent {
  type: 'event';
  /** e.g. `speech_start`, `speech_end`, `viseme`, `word`, `mark` (see docs/mux-format.md). */
  name: string;
  pts: number;
  time: number;
  /** Samples the event spans (0: an instant). */
  durationSamples: number;
  /** Parsed JSON payload, or null when the event has none. */
  data: unknown;
}

export interface MuxTrackTotals {
  track: number;
  /** Audio: samples per channel. Video: frames. */
  count: number;
  /** Codec data bytes of the track (record prefixes excluded). */
  bytes: number;
}

export interface MuxEnd {
  type: 'end';
  /** Length of the timeline in samples (the end of the audio). */
  durationSamples: number;
  /** durationSamples in seconds. */
  duration: number;
  events: number;
  tracks: MuxTrackTotals[];
}

/** The server failed mid-stream. Terminal, like `end`: nothing follows it. */
export interface MuxErrorRecord {
  type: 'error';
  code: string;
  message: string;
  retryable: boolean;
  /** Any further fields the server sent. */
  details: Record<string, unknown>;
}

export type AvatarMuxRecord = MuxHeader | MuxAudioChunk | MuxVideoFrame | MuxEvent | MuxEnd | MuxErrorRecord;
