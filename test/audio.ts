import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { encodeWav, resolveFfmpegPath } from '../render/encode/index.ts';
import { speechFromText } from '../render/talking-head/index.ts';

/** Real speech for tests: the embedded TTS, as a WAV file's bytes, and other formats made from it with ffmpeg. */

/** `text` spoken by the embedded TTS, as WAV bytes, with its length in seconds. */
export async function speechWav(text: string): Promise<{ wav: Buffer; seconds: number }> {
  const s = await speechFromText(text);
  return { wav: encodeWav(s.samples, s.sampleRate), seconds: s.durationSeconds };
}

/** Audio bytes converted by ffmpeg to `format` (mp3, ogg, m4a, ...), optionally looped `repeat` times. */
export function convertAudio(
  bytes: Buffer,
  format: 'mp3' | 'ogg' | 'm4a' | 'wav',
  o: { repeat?: number } = {},
): Buffer {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'test-audio-'));
  const input = path.join(dir, 'in');
  const out = path.join(dir, `out.${format}`);
  writeFileSync(input, bytes);
  const loop = o.repeat && o.repeat > 1 ? ['-stream_loop', String(o.repeat - 1)] : [];
  execFileSync(resolveFfmpegPath(), [
    '-v',
    'error',
    '-y',
    ...loop,
    '-i',
    input,
    ...(format === 'm4a' ? ['-c:a', 'aac'] : []),
    out,
  ]);
  return readFileSync(out);
}
