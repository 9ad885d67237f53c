/**
 * `npm run --silent call -- --grant grant.json --say "Hello, who are you?" --out call.mp4`
 *
 * Joins a live session as its user, from the terminal: the grant of `POST
 * /api/v1/realtime/livekit/session` (saved to a file, or `-` for stdin) gives the server URL and the
 * participant token. Each `--say` sentence is spoken into the call as the user's microphone (the
 * embedded TTS), after the avatar's video arrives and a few seconds apart; transcripts the agent
 * publishes are printed as they come; what the avatar publishes (video and audio) is written to
 * `--out` (an MP4). Leaves after `--seconds` (default 30), which ends the call.
 */
// First, before rtc-node loads: it would log at debug level in the middle of the CLI's output.
import './rtc-node-quiet.ts';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  AudioFrame,
  AudioSource,
  AudioStream,
  LocalAudioTrack,
  Room,
  RoomEvent,
  TrackKind,
  TrackPublishOptions,
  TrackSource,
  VideoBufferType,
  VideoStream,
  dispose,
  type RemoteTrack,
} from '@livekit/rtc-node';
import { Mp4Writer } from '../render/encode/index.ts';
import { closeTts, synthesize } from '../render/tts/index.ts';

const { values } = parseArgs({
  options: {
    grant: { type: 'string' },
    url: { type: 'string' },
    token: { type: 'string' },
    say: { type: 'string', multiple: true },
    out: { type: 'string' },
    seconds: { type: 'string', default: '30' },
  },
});

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

/**
 * The grant in `file` (`-`: stdin): the mint's answer. Anything else stops here saying what the file
 * holds, an API error above all (`> grant.json` keeps a refused mint's body, 503 without LiveKit).
 */
function readGrant(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    fail(`Cannot read the grant ${file}: ${(err as Error).message}`);
  }
  const shown = JSON.stringify(text.length > 300 ? `${text.slice(0, 300)}...` : text);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    fail(`${file} is not a grant (the mint's JSON answer): it holds ${text.trim() ? shown : 'nothing'}`);
  }
  const fields = body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  if (typeof fields.error === 'string')
    fail(
      `${file} is not a grant but the API's refusal of the mint: ${String(fields.status ?? '')} ${String(fields.code ?? '')}: ${fields.error}` +
        (fields.code === 'capacity_unavailable' && /LiveKit/.test(fields.error)
          ? '\nStart the API with LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET set (README, "Live calls"), then mint again.'
          : ''),
    );
  if ('queue_ticket_id' in fields)
    fail(`${file} is not a grant but a capacity-queue ticket (429: every call slot is taken): mint again with it`);
  if (typeof fields.server_url !== 'string' || typeof fields.participant_token !== 'string')
    fail(`${file} is not a grant (no server_url and participant_token): it holds ${shown}`);
  return fields;
}

const grant = values.grant ? readGrant(values.grant) : {};
const url = values.url ?? (grant.server_url as string | undefined);
const token = values.token ?? (grant.participant_token as string | undefined);
if (!url || !token) fail('Give --grant FILE (the mint answer), or --url and --token');
const avatarIdentity = grant.avatar_identity as string | undefined;
const seconds = Number(values.seconds);
if (!Number.isFinite(seconds) || seconds <= 0) fail('--seconds must be a positive number');

const room = new Room();
const SR = 24_000;
const FPS = 25;
let videoSeen = false;
const started = performance.now();
const stamp = () => `${((performance.now() - started) / 1000).toFixed(1).padStart(5)} s`;

function isAvatar(identity: string): boolean {
  return avatarIdentity ? identity === avatarIdentity : identity.startsWith('avatar-');
}

/**
 * What the avatar published, written to the MP4 as the user got it: each frame and each audio chunk at
 * the time it reached us, from the first frame on (the file's 0). A frame the worker did not deliver
 * is the one before it again, and a gap in the audio is silence, so neither track runs ahead of the
 * other.
 */
class CallFile {
  private writer: Mp4Writer | null = null;
  /** performance.now() of the file's start (the first frame's time). */
  private t0 = 0;
  /** Frames and samples written so far (the next frame's index, the next sample's). */
  private frames = 0;
  private samples = 0;
  /**
   * One chain per track: the MP4 writer makes a write of the track ahead wait for ffmpeg, which
   * reads the track behind first; in one chain that write would wait on the other track's writes
   * queued behind it.
   */
  private readonly chains = { video: Promise.resolve(), audio: Promise.resolve() };

  constructor(private readonly path: string) {}

  video(rgba: Uint8Array, width: number, height: number): void {
    const at = performance.now();
    if (!this.writer) {
      this.writer = new Mp4Writer({ path: this.path, width, height, fps: FPS, sampleRate: SR });
      this.t0 = at;
    }
    const slot = Math.round(((at - this.t0) * FPS) / 1000);
    // Two frames in one slot (a burst): the later one is dropped, its slot shows the first.
    if (slot < this.frames) return;
    const repeats = slot - this.frames;
    this.frames = slot + 1;
    const copy = rgba.slice();
    this.queue('video', async (w) => {
      for (let i = 0; i < repeats; i++) await w.repeatVideoFrame();
      await w.writeVideoFrame(copy);
    });
  }

  audio(pcm: Int16Array): void {
    if (!this.writer) return; // before the first frame: not in the file
    // The chunk ends now: where it starts by our clock, and by the samples written so far.
    const endsAt = Math.round(((performance.now() - this.t0) * SR) / 1000);
    const startsAt = endsAt - pcm.length;
    // A gap (the track stalled, or had not started): silence up to where this chunk starts. A chunk
    // late to reach us (a busy event loop) follows the last one, sample after sample.
    const silence = startsAt - this.samples > SR * 0.06 ? startsAt - this.samples : 0;
    // Nothing is heard before it arrives: audio that would end after now (chunks queued before the
    // first frame, delivered in one burst after it) loses what is older, or the whole file's audio
    // would lag its video by that backlog.
    const ahead = this.samples + silence + pcm.length - endsAt;
    const chunk = ahead > 0 ? pcm.subarray(Math.min(pcm.length, ahead)) : pcm;
    this.samples += silence + chunk.length;
    const copy = chunk.slice();
    this.queue('audio', async (w) => {
      if (silence > 0) await w.writeAudio(new Int16Array(silence));
      await w.writeAudio(copy);
    });
  }

  async finish(): Promise<{ videoDuration: number; audioDuration: number } | null> {
    await Promise.all([this.chains.video, this.chains.audio]);
    return this.writer ? this.writer.finish() : null;
  }

  private queue(track: 'video' | 'audio', write: (w: Mp4Writer) => Promise<void>): void {
    const w = this.writer!;
    this.chains[track] = this.chains[track]
      .then(() => write(w))
      .catch((err: unknown) => console.error(`recording: ${String(err)}`));
  }
}

const file = values.out ? new CallFile(values.out) : null;

async function record(track: RemoteTrack): Promise<void> {
  if (track.kind === TrackKind.KIND_VIDEO) {
    for await (const ev of new VideoStream(track)) {
      const rgba = ev.frame.convert(VideoBufferType.RGBA);
      if (!videoSeen) {
        videoSeen = true;
        console.log(`${stamp()}  avatar video ${rgba.width}x${rgba.height}`);
      }
      file?.video(
        new Uint8Array(rgba.data.buffer, rgba.data.byteOffset, rgba.data.byteLength),
        rgba.width,
        rgba.height,
      );
    }
  } else {
    for await (const frame of new AudioStream(track, { sampleRate: SR, numChannels: 1 })) file?.audio(frame.data);
  }
}

room.on(RoomEvent.TrackSubscribed, (track, _pub, p) => {
  if (isAvatar(p.identity)) void record(track).catch(() => {});
});
room.on(RoomEvent.ParticipantConnected, (p) => console.log(`${stamp()}  joined: ${p.identity}`));
room.on(RoomEvent.ParticipantDisconnected, (p) => console.log(`${stamp()}  left: ${p.identity}`));
/** When the avatar's last answer was said (its transcript stream closed). */
let lastAnswerAt = 0;
// The user's transcripts come as one stream per interim and final result (printed: the finals);
// the avatar's speech as one stream of deltas per reply, closed when it is said (or interrupted).
room.registerTextStreamHandler('lk.transcription', (reader, { identity }) => {
  reader.readAll().then(
    (text) => {
      const mine = identity === room.localParticipant?.identity;
      if (mine && reader.info.attributes?.['lk.transcription_final'] !== 'true') return;
      if (text.trim()) console.log(`${stamp()}  ${mine ? 'heard' : 'avatar'}: ${text.trim()}`);
      if (!mine && text.trim()) lastAnswerAt = performance.now();
    },
    // A stream still open when the call ends fails ("Disconnected while receiving"): nothing to print.
    () => {},
  );
});

await room.connect(url!, token!, { autoSubscribe: true, dynacast: false });
console.log(`${stamp()}  connected to ${room.name} as ${room.localParticipant?.identity}`);
const mic = new AudioSource(SR, 1, 100);
await room.localParticipant!.publishTrack(
  LocalAudioTrack.createAudioTrack('microphone', mic),
  new TrackPublishOptions({ source: TrackSource.SOURCE_MICROPHONE }),
);

// The microphone: silence at real-time pace (voice activity detection needs it), and the sentences in
// turn, as a polite user says them: the first 1.5 s after the avatar's video arrives, each next one
// 1.5 s after the avatar has answered the last (15 s after it without an answer). Speaking over the
// start of the avatar's first answer would be lost: agents-js ignores the user then (its AEC warm-up).
const sentences = [...(values.say ?? [])];
const deadline = performance.now() + seconds * 1000;
let speech: Int16Array | null = null;
let nextAt: number | null = null;
let saidAt = 0;
while (performance.now() < deadline) {
  if (videoSeen && nextAt === null) nextAt = performance.now() + 1500;
  if (!speech && saidAt > 0 && lastAnswerAt > saidAt) nextAt = Math.min(nextAt!, lastAnswerAt + 1500);
  if (!speech && nextAt !== null && performance.now() >= nextAt && sentences.length > 0) {
    const text = sentences.shift()!;
    const s = await synthesize({ text, voice: 'rms' });
    // To the microphone's rate (nearest sample: this is speech for a VAD and an STT, not music).
    speech = new Int16Array(Math.round((s.samples.length * SR) / s.sampleRate));
    for (let i = 0; i < speech.length; i++)
      speech[i] = s.samples[Math.min(s.samples.length - 1, Math.floor((i * s.sampleRate) / SR))]!;
    console.log(`${stamp()}  you: ${text}`);
  }
  const chunk = new Int16Array(SR / 50);
  if (speech) {
    chunk.set(speech.subarray(0, chunk.length));
    speech = speech.length > chunk.length ? speech.subarray(chunk.length) : null;
    if (!speech) {
      saidAt = performance.now();
      nextAt = saidAt + 15_000;
    }
  }
  await mic.captureFrame(new AudioFrame(chunk, SR, 1, chunk.length));
}

await room.disconnect();
const written = await file?.finish();
if (written)
  console.log(
    `${stamp()}  wrote ${values.out} (${written.videoDuration.toFixed(1)} s of video, ${written.audioDuration.toFixed(1)} s of audio)`,
  );
await closeTts();
await dispose();
process.exit(0);
