/**
 * A call's recording, from the user's arrival to the call's end: its row (through the sink), its
 * MP4 written locally by a CallRecorder, then put in storage. A recording that cannot start leaves
 * the call running unrecorded; one that fails at the end is marked failed, never retried.
 */
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../../core/platform/log.ts';
import type { ObjectStorage } from '../../core/platform/storage/index.ts';
import type { CallRecordingSink } from './call.ts';
import type { Mp4Writer } from '../../render/encode/index.ts';
import { CallRecorder, recordingWriter } from './recorder.ts';

export interface CallRecordingOptions {
  sink: CallRecordingSink;
  storage: ObjectStorage;
  /** Where the MP4 is written before it goes to storage. */
  workDir: string;
  fps: number;
  sampleRate: number;
  /** The call's playout position, in samples: where the user's audio goes, and how far the audio is written. */
  position: () => number;
  log: Logger;
}

export class CallRecording {
  private file: { recordingId: string; storageKey: string; path: string } | null = null;
  /** Writing while the call records: from `start` until `finish`. */
  private recorder: CallRecorder | null = null;
  /** The encoder started ahead (`prepare`), until `start` takes it or `finish` lets it go. */
  private ahead: Promise<{ writer: Mp4Writer; path: string } | null> = Promise.resolve(null);

  constructor(private readonly o: CallRecordingOptions) {}

  /** The avatar's audio, as playout hands it to the sink at sample `at`. */
  avatarAudio(at: number, pcm: Int16Array): void {
    this.recorder?.avatarAudio(at, pcm);
  }

  /** Playout dropped the avatar's audio from sample `from` on (an interruption). */
  avatarAudioDropped(from: number): void {
    this.recorder?.avatarAudioDropped(from);
  }

  /** The user's audio, heard now. */
  userAudio(pcm: Int16Array): void {
    this.recorder?.userAudio(this.o.position(), pcm);
  }

  /** A video frame as published. */
  video(frame: number, i420: Uint8Array): void {
    if (!this.recorder) return;
    this.recorder.video(frame, i420);
    // Audio follows a little behind playout (so the user's audio for that time has arrived), every 200 ms.
    if (frame % 5 === 0) this.recorder.flushAudio(this.o.position() - this.o.sampleRate * 0.15);
  }

  /**
   * Starts the recording's encoder ahead, while the avatar joins: starting it forks ffmpeg, which
   * blocks the event loop (30 to 80 ms for a worker's size), and at the user's arrival that fell on
   * the call's first frames. Called once, before `start`.
   */
  prepare(width: number, height: number): void {
    const { fps, sampleRate } = this.o;
    this.ahead = (async () => {
      await mkdir(this.o.workDir, { recursive: true });
      const file = path.join(this.o.workDir, `${randomUUID()}.mp4`);
      return { writer: recordingWriter({ path: file, width, height, fps, sampleRate }), path: file };
    })().catch((err: unknown) => {
      // `start` then starts one itself.
      this.o.log.warn({ err }, 'could not start the recording encoder ahead');
      return null;
    });
  }

  /** Begins recording at video frame `startFrame` of the call (the first one not yet shown). */
  async start(width: number, height: number, startFrame: number): Promise<void> {
    const { fps, sampleRate } = this.o;
    const ahead = await this.takeAhead();
    try {
      const begun = await this.o.sink.begin();
      await mkdir(this.o.workDir, { recursive: true });
      const file = ahead?.path ?? path.join(this.o.workDir, `${begun.recordingId}.mp4`);
      this.file = { ...begun, path: file };
      const startSample = Math.round((startFrame * sampleRate) / fps);
      this.recorder = new CallRecorder(
        { path: file, width, height, fps, sampleRate, startFrame, startSample },
        ahead?.writer,
      );
    } catch (err) {
      this.o.log.error({ err }, 'could not start the recording');
      await ahead?.writer.abort().catch(() => {});
    }
  }

  private async takeAhead(): Promise<{ writer: Mp4Writer; path: string } | null> {
    const ahead = await this.ahead;
    this.ahead = Promise.resolve(null);
    return ahead;
  }

  /** Ends the MP4 at playout sample `endSample` and stores it; marks the recording ready, or failed. */
  async finish(endSample: number): Promise<void> {
    // An encoder started for a user who never came.
    const ahead = await this.takeAhead();
    await ahead?.writer.abort().catch(() => {});
    const rec = this.file;
    const recorder = this.recorder;
    if (!rec || !recorder) return;
    this.recorder = null;
    try {
      const result = await recorder.finish(endSample);
      await this.o.storage.put(rec.storageKey, createReadStream(result.path), { contentType: 'video/mp4' });
      await this.o.sink.ready(rec.recordingId, {
        durationSeconds: result.durationSeconds,
        sizeBytes: result.sizeBytes,
      });
      this.o.log.info(
        {
          recordingId: rec.recordingId,
          seconds: result.durationSeconds,
          // Frames shown while the recording was starting, each recorded as its first frame (a measure of that start).
          leadInFrames: recorder.leadInFrames,
          encoderBehindFrames: recorder.dropped,
        },
        'recording ready',
      );
    } catch (err) {
      this.o.log.error({ err, recordingId: rec.recordingId }, 'recording failed');
      await recorder.abort().catch(() => {});
      await this.o.sink.failed(rec.recordingId, err instanceof Error ? err.message : String(err)).catch(() => {});
    } finally {
      await rm(rec.path, { force: true });
    }
  }
}
