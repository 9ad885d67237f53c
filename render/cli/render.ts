import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { isGenerateError } from '../generate/index.ts';
import { isRigError } from '../rig/index.ts';
import { renderTalkingHeadMp4, speechFromAudioFile, speechFromText, TalkingHeadError } from '../talking-head/index.ts';
import { closeTts, isTtsError, VOICE_NAMES } from '../tts/index.ts';

/**
 *   npm run --silent render -- --portrait IMAGE --text "TEXT" --out OUT.mp4
 *   npm run --silent render -- --portrait IMAGE --audio FILE.wav --out OUT.mp4
 */
const USAGE = `Usage: npm run --silent render -- --portrait IMAGE (--text "TEXT" | --audio FILE) --out OUT.mp4
  [--voice ${VOICE_NAMES.join('|')}] [--fps 25] [--seed N]

Speaks the text with the embedded TTS (or lip-syncs the given audio) over the portrait's generated
idle loop, and writes an H.264 + AAC MP4.`;

class UsageError extends Error {}

async function main(): Promise<number> {
  let o;
  try {
    o = parseArgs({
      options: {
        portrait: { type: 'string' },
        text: { type: 'string' },
        audio: { type: 'string' },
        out: { type: 'string' },
        voice: { type: 'string' },
        fps: { type: 'string' },
        seed: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (o.help) {
    console.log(USAGE);
    return 0;
  }
  if (!o.portrait) throw new UsageError('missing --portrait');
  if (!existsSync(o.portrait)) throw new UsageError(`no such file: ${o.portrait}`);
  if ((o.text === undefined) === (o.audio === undefined))
    throw new UsageError('give exactly one of --text and --audio');
  if (o.audio !== undefined && !existsSync(o.audio)) throw new UsageError(`no such file: ${o.audio}`);
  if (!o.out) throw new UsageError('missing --out');
  if (path.extname(o.out).toLowerCase() !== '.mp4') throw new UsageError('--out must end in .mp4');
  const fps = o.fps === undefined ? 25 : Number(o.fps);
  if (!Number.isInteger(fps) || fps < 10 || fps > 60) throw new UsageError('--fps must be an integer from 10 to 60');
  if (o.voice !== undefined && !(VOICE_NAMES as readonly string[]).includes(o.voice)) {
    throw new UsageError(`unknown --voice ${o.voice}; voices: ${VOICE_NAMES.join(', ')}`);
  }

  const started = performance.now();
  const speech =
    o.text !== undefined
      ? await speechFromText(o.text, { voice: o.voice, fps })
      : await speechFromAudioFile(o.audio!, { fps });
  const result = await renderTalkingHeadMp4({ portrait: o.portrait, speech, out: o.out, seed: o.seed ?? 1 });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(
    `wrote ${o.out}: ${result.videoFrames} frames at ${fps} fps, ${speech.durationSeconds.toFixed(2)} s of speech, in ${seconds} s`,
  );
  return 0;
}

let code: number;
try {
  code = await main();
} catch (err) {
  if (err instanceof UsageError) {
    console.error(`render: ${err.message}\n\n${USAGE}`);
    code = 2;
  } else if (err instanceof TalkingHeadError || isRigError(err) || isTtsError(err) || isGenerateError(err)) {
    // The user's input was refused: say why in their terms.
    const e = err as Error & { code: string };
    console.error(`render: ${e.message} (${e.code})`);
    code = 2;
  } else {
    console.error(`render: failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    code = 1;
  }
}
await closeTts().catch(() => {});
process.exit(code);
