import { spawn } from 'node:child_process';
import { resolveFfmpegPath } from '../encode/index.ts';
import { synthesize } from '../tts/index.ts';
import { audioToVisemeTrack, visemeTrack, type MouthFrame } from '../visemes/index.ts';
import { TalkingHeadError } from './errors.ts';

/** Speech ready to render: mono s16 audio and one mouth frame per video frame. */
export interface Speech {
  samples: Int16Array;
  sampleRate: number;
  fps: number;
  mouth: MouthFrame[];
  durationSeconds: number;
}

/** Longest audio a single render accepts (a lipsync request or a CLI run). */
const MAX_AUDIO_SECONDS = 600;
/** Rate given audio is decoded at: plenty for speech, and what the audio viseme model resamples from. */
const DECODE_SAMPLE_RATE = 24_000;

/** Text spoken by the embedded TTS; its phone timings give exact visemes. */
export async function speechFromText(text: string, options: { voice?: string; fps?: number } = {}): Promise<Speech> {
  const fps = options.fps ?? 25;
  const tts = await synthesize({ text, ...(options.voice ? { voice: options.voice as never } : {}) });
  const track = visemeTrack(tts.phones, fps, { durationSeconds: tts.durationSeconds });
  return {
    samples: tts.samples,
    sampleRate: tts.sampleRate,
    fps,
    mouth: track.frames,
    durationSeconds: tts.durationSeconds,
  };
}

/** Given audio (any format ffmpeg reads); visemes from the audio itself. `maxSeconds` caps its length (at most MAX_AUDIO_SECONDS). */
export async function speechFromAudioFile(
  path: string,
  options: { fps?: number; maxSeconds?: number } = {},
): Promise<Speech> {
  const fps = options.fps ?? 25;
  const samples = await decodeAudio(path, DECODE_SAMPLE_RATE, options.maxSeconds);
  const track = await audioToVisemeTrack(samples, DECODE_SAMPLE_RATE, fps);
  return {
    samples,
    sampleRate: DECODE_SAMPLE_RATE,
    fps,
    mouth: track.frames,
    durationSeconds: samples.length / DECODE_SAMPLE_RATE,
  };
}

/**
 * Decodes an audio file to mono s16 at `sampleRate` through ffmpeg, with clear refusals: audio
 * longer than `maxSeconds` (default and ceiling MAX_AUDIO_SECONDS) is refused after decoding only
 * just past the cap.
 */
export async function decodeAudio(
  path: string,
  sampleRate: number,
  maxSeconds = MAX_AUDIO_SECONDS,
): Promise<Int16Array> {
  const capSeconds = Math.min(maxSeconds, MAX_AUDIO_SECONDS);
  const maxBytes = Math.floor(capSeconds * sampleRate) * 2;
  const args = [
    '-v',
    'error',
    '-nostdin',
    '-i',
    path,
    '-map',
    '0:a:0',
    '-ac',
    '1',
    '-ar',
    String(sampleRate),
    '-f',
    's16le',
    '-t',
    String(capSeconds + 1),
    'pipe:1',
  ];
  const child = spawn(resolveFfmpegPath(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const chunks: Buffer[] = [];
  let bytes = 0;
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    bytes += d.length;
    if (bytes <= maxBytes + sampleRate * 2) chunks.push(d);
  });
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  const code = await new Promise<number>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (c) => resolve(c ?? -1));
  });
  if (code !== 0)
    throw new TalkingHeadError('invalid_audio', `The audio could not be decoded: ${decodeFailure(stderr, path)}`);
  if (bytes > maxBytes) throw new TalkingHeadError('audio_too_long', `The audio is longer than ${capSeconds} s`);
  const buf = Buffer.concat(chunks);
  if (buf.length < 2) throw new TalkingHeadError('invalid_audio', 'The audio has no samples');
  return new Int16Array(buf.buffer, buf.byteOffset, buf.length >> 1).slice();
}

/**
 * ffmpeg's reason for a failed decode, fit for the caller: its last line that says something (not
 * a hint about its own options), without the input's path (a server temp file) or the
 * `[demuxer @ 0x...]` prefixes (memory addresses of the server's process).
 */
export function decodeFailure(stderr: string, inputPath: string): string {
  const lines = stderr
    .split('\n')
    .map((l) =>
      l
        .split(`${inputPath}: `)
        .join('')
        .split(inputPath)
        .join('the audio')
        .replace(/\[[^\]]* @ 0x[0-9a-f]+\] */gi, '')
        .trim(),
    )
    .filter((l) => l && !/^To ignore this/i.test(l));
  return lines.pop() ?? 'unreadable';
}
