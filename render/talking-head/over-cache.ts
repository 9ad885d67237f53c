import { Mp4Writer, type Mp4Result } from '../encode/index.ts';
import { openFrameCache } from '../framecache/index.ts';
import {
  createLipSync,
  MEL_SAMPLE_RATE,
  melSpectrogram,
  melWindow,
  type LipSyncFace,
  type LipSyncItem,
} from '../lipsync/index.ts';
import { decodeAudio, speechFromAudioFile } from './speech.ts';
import { mouthShape, RENDER_BATCH } from './talking-head.ts';
import { TalkingHeadError } from './errors.ts';

export interface CacheTalkingHeadOptions {
  /** A local frame cache folder (manifest.json, frames.bin, landmarks.f32): the idle loop to speak over. */
  cacheDir: string;
  /** Audio in any format ffmpeg reads; its length sets the video's. */
  audioPath: string;
  /** The MP4 to write. */
  out: string;
  /** Lip-sync engine: `builtin` (default) or a path to a Wav2Lip-class ONNX model (LIPSYNC_MODEL). */
  lipsyncModel?: string;
  /** Longest audio accepted, seconds (TalkingHeadError audio_too_long past it). */
  maxSeconds?: number;
}

export interface CacheTalkingHeadResult extends Mp4Result {
  fps: number;
  width: number;
  height: number;
}

/**
 * Given audio lip-synced over a stored idle loop (a frame cache with the face rig of every frame),
 * written as an H.264 + AAC MP4 at the loop's frame rate and size. The loop plays on from frame 0,
 * wrapping around, and the mouth of each frame follows the audio: the body never restarts for
 * speech. Used by the lipsync API (in a child process: render/cli/lipsync-job.ts).
 */
export async function renderTalkingHeadOverCache(o: CacheTalkingHeadOptions): Promise<CacheTalkingHeadResult> {
  const cache = await openFrameCache(o.cacheDir, { lruFrames: RENDER_BATCH * 2 });
  const { fps, width, height } = cache.manifest;
  if (!Number.isInteger(fps) || fps <= 0)
    throw new TalkingHeadError(
      'invalid_options',
      `The idle loop's frame rate ${fps} is not a whole number of frames per second`,
    );
  const speech = await speechFromAudioFile(o.audioPath, { fps, ...(o.maxSeconds ? { maxSeconds: o.maxSeconds } : {}) });
  const engine = await createLipSync(o.lipsyncModel);
  // A neural model reads the audio itself (a mel window per frame), at its own sample rate.
  const mel = engine.needsAudio
    ? melSpectrogram(floats(await decodeAudio(o.audioPath, MEL_SAMPLE_RATE, o.maxSeconds)))
    : undefined;
  const faces = new Map<number, LipSyncFace>();
  const face = (i: number) => {
    let f = faces.get(i);
    if (!f) faces.set(i, (f = engine.prepare(cache.rig(i))));
    return f;
  };
  const writer = new Mp4Writer({ path: o.out, width, height, fps, sampleRate: speech.sampleRate });
  try {
    const perFrame = speech.sampleRate / fps;
    let audioAt = 0;
    const frames = speech.mouth.length;
    for (let start = 0; start < frames; start += RENDER_BATCH) {
      const items: LipSyncItem[] = [];
      for (let i = start; i < Math.min(frames, start + RENDER_BATCH); i++) {
        const at = i % cache.frameCount;
        items.push({
          frame: { data: await cache.frame(at), width, height },
          face: face(at),
          shape: mouthShape(speech.mouth[i]!),
          ...(mel ? { mel: melWindow(mel, i, fps) } : {}),
        });
      }
      const drawn = await engine.renderFrames(items);
      for (let k = 0; k < drawn.length; k++) {
        // Audio in slices beside the video, so neither of ffmpeg's pipes runs far ahead.
        const until = Math.min(speech.samples.length, Math.round((start + k + 1) * perFrame));
        if (until > audioAt) await writer.writeAudio(speech.samples.subarray(audioAt, until));
        audioAt = until;
        const rgba = drawn[k]!;
        await writer.writeVideoFrame(
          rgba instanceof Uint8Array ? rgba : new Uint8Array(rgba.buffer, rgba.byteOffset, rgba.byteLength),
        );
      }
    }
    if (audioAt < speech.samples.length) await writer.writeAudio(speech.samples.subarray(audioAt));
    const result = await writer.finish();
    return { ...result, fps, width, height };
  } catch (err) {
    await writer.abort();
    throw err;
  } finally {
    await engine.release();
  }
}

function floats(s: Int16Array): Float32Array {
  const out = new Float32Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s[i]! / 32768;
  return out;
}
