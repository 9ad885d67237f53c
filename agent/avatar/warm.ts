/**
 * What a call does for the first time in a process costs many times what it costs later: an
 * onnxruntime session's first runs, the JIT's first passes over the frame conversion, protobuf-es
 * building each FFI message type's field tables on first use, Node's web streams making their
 * "reader released" error (with a stack through the source maps) the first time rtc-node lets a
 * reader go. In a fresh worker's first call all of that landed on the call's first second, as
 * event-loop stalls of 60 to 200 ms (a CPU profile of the worker), and the viewer's picture
 * stuttered. The worker does each of them once as it starts, off any call.
 */
import { AudioFrame, AudioSource, VideoBufferType, VideoFrame, VideoSource } from '@livekit/rtc-node';
import type { Logger } from '../../core/platform/log.ts';
import { encodeJpeg, i420Size, resolveFfmpegPath } from '../../render/encode/index.ts';
import type { FrameDecoder } from '../../render/framecache/index.ts';
import type { LipSyncEngine } from '../../render/lipsync/index.ts';
import { voiceLikeBuzz, warmUpLipSync } from '../../render/lipsync/index.ts';
import type { AudioVisemeThread } from '../../render/visemes/index.ts';
import { rtcFfiBindings } from '../rtc-logs.ts';

export interface CallPathEngines {
  lipsync: Pick<LipSyncEngine, 'kind' | 'prepare' | 'renderI420' | 'needsAudio'>;
  mouthAnalysis: Pick<AudioVisemeThread, 'open'>;
  frameDecoder: FrameDecoder;
}

const SIZE = 512;
const SAMPLE_RATE = 24_000;

/** Warms every step of a call's path; one that fails is logged and left to the first call. */
export async function warmCallPath(engines: CallPathEngines, log: Logger): Promise<void> {
  const steps: [string, () => Promise<void> | void][] = [
    ['ffiTypes', warmFfiTypes],
    ['sources', warmSources],
    ['webStreams', () => new ReadableStream().getReader().releaseLock()],
    ['frames', () => warmFrameDecoding(engines.frameDecoder)],
    // Its first call loads the ffmpeg package's module (a recording's start).
    ['ffmpeg', () => void resolveFfmpegPath()],
    ['lipsync', () => warmUpLipSync(engines.lipsync)],
    ['mouthAnalysis', () => warmMouthAnalysis(engines.mouthAnalysis)],
  ];
  const ms: Record<string, number> = {};
  for (const [name, step] of steps) {
    const t0 = performance.now();
    try {
      await step();
    } catch (err) {
      log.warn({ err, step: name }, 'could not warm a step of the call path');
    }
    ms[name] = Math.round(performance.now() - t0);
  }
  log.debug({ ms }, 'call path warmed');
}

/**
 * protobuf-es builds a message type's field tables the first time one is read or written (tens of
 * ms for rtc-node's 400 types, on a call's first events): built here for every type the FFI
 * protocol reaches.
 */
function warmFfiTypes(): void {
  const bindings = rtcFfiBindings();
  const seen = new Set<unknown>();
  const walk = (type: unknown): void => {
    const fields = (type as { fields?: ProtoFieldList } | undefined)?.fields;
    if (!fields || seen.has(type)) return;
    seen.add(type);
    fields.find(0);
    fields.byNumber();
    fields.byMember();
    for (const f of fields.list()) {
      if (f.kind === 'message') walk(f.T);
      else if (f.kind === 'map' && f.V?.kind === 'message') walk(f.V.T);
    }
  };
  for (const type of [bindings.FfiRequest, bindings.FfiResponse, bindings.FfiEvent]) walk(type);
}

/** protobuf-es's (v1) field list, as far as the walk reads it. */
interface ProtoFieldList {
  list(): readonly { kind: string; T?: unknown; V?: { kind: string; T?: unknown } }[];
  find(no: number): unknown;
  byNumber(): unknown;
  byMember(): unknown;
}

/** An audio and a video source, fed a few frames (the FFI requests a call makes 75 times a second). */
async function warmSources(): Promise<void> {
  const audio = new AudioSource(SAMPLE_RATE, 1);
  const video = new VideoSource(SIZE, SIZE);
  try {
    const samples = SAMPLE_RATE / 50;
    for (let i = 0; i < 5; i++) {
      await audio.captureFrame(new AudioFrame(new Int16Array(samples), SAMPLE_RATE, 1, samples));
      video.captureFrame(new VideoFrame(new Uint8Array(i420Size(SIZE, SIZE)), SIZE, SIZE, VideoBufferType.I420));
    }
  } finally {
    await audio.close();
    await video.close();
  }
}

/** A stored frame's path to the encoder: a JPEG decoded and converted to I420 (its loops optimised by the JIT). */
async function warmFrameDecoding(decoder: FrameDecoder): Promise<void> {
  const jpeg = await encodeJpeg(new Uint8Array(SIZE * SIZE * 4).fill(128), SIZE, SIZE);
  for (let i = 0; i < 5; i++) await decoder.jpegToI420(jpeg, SIZE, SIZE);
}

/**
 * The viseme model's first runs: left to a worker's first reply, they fell on its first frames of
 * speech. Half a second of a voice-like buzz, as a reply's audio arrives.
 */
async function warmMouthAnalysis(analysis: Pick<AudioVisemeThread, 'open'>): Promise<void> {
  const pcm = voiceLikeBuzz(0, SAMPLE_RATE / 2, SAMPLE_RATE);
  const stream = analysis.open({ sampleRate: SAMPLE_RATE, fps: 25 });
  for (let i = 0; i < pcm.length; i += 960) await stream.push(pcm.slice(i, i + 960));
  await stream.end();
}
