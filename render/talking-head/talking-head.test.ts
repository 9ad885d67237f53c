import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeWav, resolveFfmpegPath } from '../encode/index.ts';
import { detectFaceRig } from '../rig/index.ts';
import { closeTts } from '../tts/index.ts';
import { runRenderJob } from '../generate/index.ts';
import { renderTalkingHeadMp4, runLipsyncJob, speechFromAudioFile, speechFromText, TalkingHeadError } from './index.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PORTRAIT = path.join(ROOT, 'render/rig/fixtures/grace_hopper.jpg');
const tmp = mkdtempSync(path.join(os.tmpdir(), 'talking-head-'));
afterAll(() => closeTts());

function probe(file: string): { codec_name: string; duration: string; nb_frames: string }[] {
  const r = spawnSync(
    'ffprobe',
    ['-v', 'error', '-show_entries', 'stream=codec_name,duration,nb_frames', '-of', 'json', file],
    { encoding: 'utf8' },
  );
  return (JSON.parse(r.stdout) as { streams: { codec_name: string; duration: string; nb_frames: string }[] }).streams;
}

/** Decodes frame `index` of an MP4 to PNG bytes. */
function frameAt(file: string, index: number): Buffer {
  const r = spawnSync(
    resolveFfmpegPath(),
    [
      '-v',
      'error',
      '-i',
      file,
      '-vf',
      `select=eq(n\\,${index})`,
      '-frames:v',
      '1',
      '-f',
      'image2',
      '-c:v',
      'png',
      'pipe:1',
    ],
    { maxBuffer: 16 << 20 },
  );
  return r.stdout;
}

function pearson(a: number[], b: number[]): number {
  const ma = a.reduce((s, x) => s + x, 0) / a.length;
  const mb = b.reduce((s, x) => s + x, 0) / b.length;
  let num = 0,
    da = 0,
    db = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i]! - ma) * (b[i]! - mb);
    da += (a[i]! - ma) ** 2;
    db += (b[i]! - mb) ** 2;
  }
  return num / Math.sqrt(da * db);
}

describe('talking head render', () => {
  it('speaks text into an H.264 + AAC MP4 whose audio and video agree within one frame, and whose mouth follows the visemes', async () => {
    const speech = await speechFromText('Hello. My name is Grace, and I wrote the first compiler.', { fps: 25 });
    expect(speech.mouth.length).toBe(Math.ceil(speech.durationSeconds * 25 - 1e-9));
    const out = path.join(tmp, 'text.mp4');
    const result = await renderTalkingHeadMp4({ portrait: PORTRAIT, speech, out });
    expect(result.videoFrames).toBe(speech.mouth.length);

    const [video, audio] = probe(out);
    expect(video?.codec_name).toBe('h264');
    expect(audio?.codec_name).toBe('aac');
    expect(Math.abs(Number(video!.duration) - Number(audio!.duration))).toBeLessThanOrEqual(1 / 25);
    expect(Math.abs(Number(video!.duration) - speech.durationSeconds)).toBeLessThanOrEqual(1 / 25);

    // The rig measures the mouth on decoded output frames; it must follow the track's opening.
    const step = 3;
    const measured: number[] = [];
    const wanted: number[] = [];
    for (let i = 0; i < speech.mouth.length; i += step) {
      const rig = await detectFaceRig(frameAt(out, i));
      measured.push(rig.mouthOpenness);
      wanted.push(speech.mouth[i]!.closed ? 0 : speech.mouth[i]!.open);
    }
    const r = pearson(measured, wanted);
    expect(r, `correlation of measured mouth opening with the viseme track: ${r.toFixed(3)}`).toBeGreaterThan(0.7);
  }, 120_000);

  it('lip-syncs given audio with visemes from the audio itself', async () => {
    const tts = await speechFromText('Open wide, then close.', { fps: 25 });
    const wav = path.join(tmp, 'given.wav');
    writeFileSync(wav, encodeWav(tts.samples, tts.sampleRate));
    const speech = await speechFromAudioFile(wav, { fps: 25 });
    expect(Math.abs(speech.durationSeconds - tts.durationSeconds)).toBeLessThan(0.05);
    const opened = speech.mouth.filter((m) => m.open > 0.3).length;
    expect(opened).toBeGreaterThan(3);
    const out = path.join(tmp, 'audio.mp4');
    await renderTalkingHeadMp4({ portrait: PORTRAIT, speech, out });
    const [video, audio] = probe(out);
    expect(Math.abs(Number(video!.duration) - Number(audio!.duration))).toBeLessThanOrEqual(1 / 25);
  }, 120_000);

  it('refuses corrupt or empty audio with a clear error', async () => {
    const corrupt = path.join(tmp, 'corrupt.wav');
    writeFileSync(corrupt, Buffer.concat([Buffer.from('RIFF\x10\x00\x00\x00WAVEfmt '), Buffer.alloc(40, 7)]));
    await expect(speechFromAudioFile(corrupt)).rejects.toBeInstanceOf(TalkingHeadError);
    const empty = path.join(tmp, 'empty.wav');
    writeFileSync(empty, encodeWav(new Int16Array(0), 16000));
    await expect(speechFromAudioFile(empty)).rejects.toMatchObject({ code: 'invalid_audio' });
  });
});

describe('talking head over a stored idle loop (the lipsync render)', () => {
  it(
    "plays the loop on and opens the mouth with the audio: an MP4 at the loop's rate and size, as long as the audio",
    { timeout: 120_000 },
    async () => {
      const loop = await runRenderJob({
        portraitPath: PORTRAIT,
        outDir: path.join(tmp, 'loop'),
        seed: 'over-cache',
        motionPrompt: null,
        seconds: 2,
        reviewed: false,
      });
      if (!loop.ok) throw new Error('the loop render was refused');
      const tts = await speechFromText('Open wide, then close. Open again.', { fps: 25 });
      const wav = path.join(tmp, 'over-cache.wav');
      writeFileSync(wav, encodeWav(tts.samples, tts.sampleRate));
      const out = path.join(tmp, 'over-cache.mp4');
      const result = await runLipsyncJob({ cacheDir: loop.cacheDir, audioPath: wav, out });
      if (!result.ok) throw new Error(result.refused.message);
      // Longer than the 2 s loop: it wraps around.
      expect(tts.durationSeconds).toBeGreaterThan(2);
      expect(result).toMatchObject({ fps: 25, width: 512, height: 512 });
      expect(Math.abs(result.durationSeconds - tts.durationSeconds)).toBeLessThanOrEqual(1 / 25);
      const [video, audio] = probe(out);
      expect(video?.codec_name).toBe('h264');
      expect(Number(video!.nb_frames)).toBe(result.frames);
      expect(Math.abs(Number(audio!.duration) - tts.durationSeconds)).toBeLessThan(0.05);

      // The mouth measured on the output follows the visemes of the audio itself.
      const speech = await speechFromAudioFile(wav, { fps: 25 });
      const measured: number[] = [];
      const wanted: number[] = [];
      for (let i = 0; i < result.frames; i += 3) {
        measured.push((await detectFaceRig(frameAt(out, i))).mouthOpenness);
        wanted.push(speech.mouth[i]!.closed ? 0 : speech.mouth[i]!.open);
      }
      const r = pearson(measured, wanted);
      expect(r, `correlation of measured mouth opening with the audio's viseme track: ${r.toFixed(3)}`).toBeGreaterThan(
        0.6,
      );
    },
  );

  it('refuses audio longer than its cap as a result, not a crash', { timeout: 60_000 }, async () => {
    const tts = await speechFromText('This sentence takes well over one second to say.', { fps: 25 });
    const wav = path.join(tmp, 'long.wav');
    writeFileSync(wav, encodeWav(tts.samples, tts.sampleRate));
    const r = await runLipsyncJob({
      cacheDir: path.join(tmp, 'loop', 'cache'),
      audioPath: wav,
      out: path.join(tmp, 'long.mp4'),
      maxSeconds: 1,
    });
    expect(r).toEqual({ ok: false, refused: { code: 'audio_too_long', message: 'The audio is longer than 1 s' } });
  });
});

describe('npm run render', () => {
  function render(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn('npm', ['run', '--silent', 'render', '--', ...args], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    });
  }

  it('refuses bad input with a clear message and exit code 2, writing nothing', async () => {
    const notImage = path.join(tmp, 'not-an-image.jpg');
    writeFileSync(notImage, 'hello');
    const cases: [string[], RegExp][] = [
      [['--portrait', PORTRAIT, '--text', '   ', '--out', path.join(tmp, 'a.mp4')], /text/i],
      [['--portrait', notImage, '--text', 'Hi.', '--out', path.join(tmp, 'b.mp4')], /image/i],
      [['--portrait', PORTRAIT, '--out', path.join(tmp, 'c.mp4')], /--text and --audio/],
      [['--portrait', PORTRAIT, '--text', 'Hi.', '--out', path.join(tmp, 'd.avi')], /\.mp4/],
    ];
    for (const [args, message] of cases) {
      const r = await render(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    expect(() => readFileSync(path.join(tmp, 'b.mp4'))).toThrow();
  }, 60_000);
});
