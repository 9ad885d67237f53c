/**
 * The user's microphone, as the avatar hears it: voice activity (Silero VAD) starts listening
 * reactions, and the audio goes to the recording. In both modes the avatar listens for itself, so a
 * provider-mode avatar reacts to the user just as a conversation-mode one does.
 */
import { VADEventType, type VAD } from '@livekit/agents';
import { AudioStream, type AudioFrame, type RemoteTrack } from '@livekit/rtc-node';
import type { Logger } from '../../core/platform/log.ts';

export interface UserAudioOptions {
  track: RemoteTrack;
  sampleRate: number;
  /** A loaded VAD (one model per worker; one stream per user). */
  vad: VAD | null;
  onSpeechStarted: () => void;
  /** Each frame of the user's audio, mono at `sampleRate`. */
  onAudio?: (pcm: Int16Array) => void;
  log: Logger;
}

export class UserAudio {
  private closed = false;
  /**
   * Held here, not by a for-await: close() cancels it, which ends a read still waiting. Cancelling
   * the stream itself fails while it is being read, and a read may never return once the room is
   * gone (no frame, no end of stream).
   */
  private readonly reader: ReadableStreamDefaultReader<AudioFrame>;
  private readonly done: Promise<void>;

  constructor(private readonly o: UserAudioOptions) {
    this.reader = new AudioStream(o.track, { sampleRate: o.sampleRate, numChannels: 1, frameSizeMs: 20 }).getReader();
    this.done = this.run();
  }

  private async run(): Promise<void> {
    const vad = this.o.vad?.stream();
    const events = vad
      ? (async () => {
          for await (const ev of vad)
            if (ev.type === VADEventType.START_OF_SPEECH && !this.closed) this.o.onSpeechStarted();
        })().catch((err: unknown) => this.o.log.warn({ err }, 'user voice activity detection failed'))
      : Promise.resolve();
    try {
      for (;;) {
        const { done, value: frame } = await this.reader.read();
        if (done || this.closed) break;
        vad?.pushFrame(frame);
        this.o.onAudio?.(frame.data);
      }
    } catch (err) {
      if (!this.closed) this.o.log.warn({ err }, 'user audio stream failed');
    } finally {
      vad?.close();
      await events;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.reader.cancel().catch(() => {});
    await this.done;
  }
}
