import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resolveFfmpegPath } from '../render/encode/index.ts';
import { speechFromText } from '../render/talking-head/index.ts';

/** Real speech for tests: the embedded TTS, as a WAV file's bytes, and other formats made from it with ffmpeg. */

/** A PCM WAV (mono s16) of `samples`. */
export function wavBytes(samples: Int16Array, sampleRate: number): Buffer {
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + samples.length * 2, 4);
  header.write('WAVEfmt ', 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(samples.length * 2, 40);
  return Buffer.concat([header, Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength)]);
}

/** `text` spoken by the embedded TTS, as WAV bytes, with its length in seconds. */
export async function speechWav(text: string): Promise<{ wav: Buffer; seconds: number }> {
  const s = await speechFromText(text);
  return { wav: wavBytes(s.samples, s.sampleRate), seconds: s.durationSeconds };
}

/** Audio bytes converted by ffmpeg to `format` (mp3, ogg, m4a, ...), optionally looped `repeat` times. */
export function convertAudio(bytes: Buffer, format: 'mp3' | 'ogg' | 'm4a' | 'wav', o: { repeat?: number } = {}): Buffer {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'test-audio-'));
  const input = path.join(dir, 'in');
  const out = path.join(dir, `out.${format}`);
  writeFileSync(input, bytes);
  const loop = o.repeat && o.repeat > 1 ? ['-stream_loop', String(o.repeat - 1)] : [];
  execFileSync(resolveFfmpegPath(), ['-v', 'error', '-y', ...loop, '-i', input, ...(format === 'm4a' ? ['-c:a', 'aac'] : []), out]);
  return readFileSync(out);
}
