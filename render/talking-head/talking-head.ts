import { Mp4Writer, type Mp4Result } from '../encode/index.ts';
import { generateIdleLoop, preparePortrait, type GeneratedMotion, type PortraitInput } from '../generate/index.ts';
import { rigFromLandmarks } from '../rig/index.ts';
import {
  createMouthSynth,
  prepareFaceForSynth,
  type MouthShape,
  type MouthSynth,
  type SynthItem,
} from '../synth/index.ts';
import type { MouthFrame } from '../visemes/index.ts';
import { TalkingHeadError } from './errors.ts';
import type { Speech } from './speech.ts';

/** Frames one lip-sync engine call draws in a render (`npm run render`, POST /lipsync): enough to amortise the graph run, small enough to stream. */
export const RENDER_BATCH = 8;

/** The synth's mouth shape for a viseme frame: lips shut means shut, whatever the smoothing left. */
export function mouthShape(m: MouthFrame): MouthShape {
  return { open: m.closed ? 0 : m.open, wide: m.wide, round: m.round, press: m.press, tuck: m.tuck, relax: m.relax };
}

export interface TalkingHeadOptions {
  portrait: PortraitInput;
  speech: Speech;
  /** The idle loop to speak over (generated from the portrait when omitted). */
  idle?: GeneratedMotion;
  seed?: string | number;
  /** Reuse one synth across renders. */
  synth?: MouthSynth;
}

/**
 * Lip-synced frames: the idle loop plays on (head motion, blinks, breathing) and the mouth follows
 * the speech on the current playback cursor, so the body never restarts for speech.
 */
async function* talkingHeadFrames(
  o: TalkingHeadOptions,
): AsyncGenerator<{ index: number; rgba: Uint8Array; width: number; height: number }> {
  const idle =
    o.idle ?? (await generateIdleLoop(await ensurePrepared(o.portrait), { fps: o.speech.fps, seed: o.seed ?? 1 }));
  if (idle.fps !== o.speech.fps)
    throw new TalkingHeadError(
      'invalid_options',
      `Idle loop at ${idle.fps} fps cannot carry speech at ${o.speech.fps} fps`,
    );
  const synth = o.synth ?? (await createMouthSynth());
  const { width, height } = idle;
  const detection = idle.rig.detection;
  try {
    for (let start = 0; start < o.speech.mouth.length; start += RENDER_BATCH) {
      const items: SynthItem[] = [];
      for (let i = start; i < Math.min(o.speech.mouth.length, start + RENDER_BATCH); i++) {
        const frame = idle.renderFrame(i % idle.frameCount);
        const rig = rigFromLandmarks(frame.landmarks, { width, height }, detection, idle.rig.presence);
        items.push({
          frame: { width, height, data: frame.rgba },
          face: prepareFaceForSynth(rig),
          shape: mouthShape(o.speech.mouth[i]!),
        });
      }
      const drawn = await synth.renderFrames(items);
      for (const [k, rgba] of drawn.entries()) yield { index: start + k, rgba: rgba as Uint8Array, width, height };
    }
  } finally {
    if (!o.synth) await synth.release();
  }
}

async function ensurePrepared(p: PortraitInput) {
  return typeof p === 'object' && !Buffer.isBuffer(p) ? p : preparePortrait(p);
}

/** Renders the talking head to an H.264 + AAC MP4 at `out`. */
export async function renderTalkingHeadMp4(o: TalkingHeadOptions & { out: string }): Promise<Mp4Result> {
  const prepared = await ensurePrepared(o.portrait);
  const idle = o.idle ?? (await generateIdleLoop(prepared, { fps: o.speech.fps, seed: o.seed ?? 1 }));
  const writer = new Mp4Writer({
    path: o.out,
    width: idle.width,
    height: idle.height,
    fps: o.speech.fps,
    sampleRate: o.speech.sampleRate,
  });
  try {
    // Audio first in slices, interleaved with video, so neither pipe runs far ahead of the other.
    const perFrame = o.speech.sampleRate / o.speech.fps;
    let audioAt = 0;
    for await (const f of talkingHeadFrames({ ...o, portrait: prepared, idle })) {
      const until = Math.min(o.speech.samples.length, Math.round((f.index + 1) * perFrame));
      if (until > audioAt) await writer.writeAudio(o.speech.samples.subarray(audioAt, until));
      audioAt = until;
      await writer.writeVideoFrame(f.rgba);
    }
    if (audioAt < o.speech.samples.length) await writer.writeAudio(o.speech.samples.subarray(audioAt));
    return await writer.finish();
  } catch (err) {
    await writer.abort();
    throw err;
  }
}
