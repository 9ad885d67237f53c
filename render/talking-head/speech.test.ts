import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveFfmpegPath } from '../encode/index.ts';
import { TalkingHeadError } from './errors.ts';
import { decodeAudio, decodeFailure } from './speech.ts';

/** The refusal of decoding `bytes` from a server temp file named like a lipsync request's. */
async function refusal(write: (file: string) => void): Promise<TalkingHeadError> {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'lipsync-')), 'audio');
  write(file);
  const err = await decodeAudio(file, 24_000).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TalkingHeadError);
  const e = err as TalkingHeadError;
  expect(e.code).toBe('invalid_audio');
  // Nothing of the server's file system or memory reaches the message.
  expect(e.message).not.toContain(os.tmpdir());
  expect(e.message).not.toContain(path.dirname(file));
  expect(e.message).not.toMatch(/lipsync-|\/audio|0x[0-9a-f]{6,}/i);
  return e;
}

describe('an audio file ffmpeg cannot decode', () => {
  it("is refused with the decoder's reason, without the server's temp path", async () => {
    const garbage = await refusal((f) => writeFileSync(f, Buffer.alloc(3000, 0x5a)));
    expect(garbage.message).toBe('The audio could not be decoded: Invalid data found when processing input');
  });

  it("a file without an audio stream says so, not ffmpeg's hint about its own options", async () => {
    const silent = await refusal((f) => {
      const r = spawnSync(resolveFfmpegPath(), [
        '-v',
        'error',
        '-f',
        'lavfi',
        '-i',
        'color=c=red:s=16x16:d=0.2',
        '-f',
        'mp4',
        '-y',
        f,
      ]);
      expect(r.status).toBe(0);
    });
    expect(silent.message).toMatch(/^The audio could not be decoded: Stream map '0:a:0' matches no streams\.$/);
  });

  it('decodeFailure strips the path wherever ffmpeg puts it, and demuxer addresses', () => {
    const p = '/tmp/lipsync-Ab12/audio';
    expect(
      decodeFailure(
        `[mov,mp4 @ 0x55d0c0ffee00] moov atom not found\n${p}: Invalid data found when processing input\n`,
        p,
      ),
    ).toBe('Invalid data found when processing input');
    expect(decodeFailure(`Error opening input file ${p}.\n`, p)).toBe('Error opening input file the audio.');
    expect(decodeFailure('[aac @ 0x7f00deadbeef] Error decoding frame\n', p)).toBe('Error decoding frame');
    expect(decodeFailure('', p)).toBe('unreadable');
  });
});
