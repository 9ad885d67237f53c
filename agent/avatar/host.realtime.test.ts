import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { initializeLogger, voice } from '@livekit/agents';
import { AudioFrame, Room, TrackKind, type RpcInvocationData } from '@livekit/rtc-node';
import { RoomServiceClient } from 'livekit-server-sdk';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { AvatarPlayback } from '../../core/avatars/playback.ts';
import { createLogger } from '../../core/platform/log.ts';
import { LocalStorage } from '../../core/platform/storage/local.ts';
import { MediaSigner } from '../../core/platform/storage/signing.ts';
import { createLipSyncThread } from '../../render/lipsync/index.ts';
import { synthesize } from '../../render/tts/index.ts';
import { waitFor } from '../../test/helpers.ts';
import { startEntryPoint } from '../../test/processes.ts';
import {
  DEV_KEY,
  DEV_SECRET,
  loopOnlyPlayback,
  median,
  mp4SyncOffsets,
  onsets,
  token,
  Viewer,
} from '../test-support.ts';
import { storeTestCache } from '../../test/realtime.ts';
import type { CallRecordingSink, CallReporter, CallSpec, ConnectionObservation, EndReason } from './call.ts';
import { AvatarHost } from './host.ts';
import { AUDIO_STREAM_TOPIC, RPC_CLEAR_BUFFER, RPC_PLAYBACK_FINISHED } from './receiver.ts';

initializeLogger({ pretty: false, level: 'warn' });
const url = inject('livekitUrl');
const rooms = new RoomServiceClient(url.replace(/^ws/, 'http'), DEV_KEY, DEV_SECRET);
const work = mkdtempSync(path.join(os.tmpdir(), 'agent-host-'));
const storage = new LocalStorage(path.join(work, 'store'), new MediaSigner('s'.repeat(32)), 'http://localhost');
let host: AvatarHost;
let loopKey: string;

beforeAll(async () => {
  loopKey = await storeTestCache(storage, 'test/loop/cache', { seconds: 4, size: 512 });
  host = new AvatarHost({
    lipsync: await createLipSyncThread('builtin'),
    vad: null,
    storage,
    livekit: { url, apiKey: DEV_KEY, apiSecret: DEV_SECRET },
    log: createLogger('silent'),
    workDir: work,
    syncMarker: true,
    heartbeatMs: 500,
  });
}, 60_000);
afterAll(() => host?.close());

class MemoryReporter implements CallReporter {
  joinedAt: number | null = null;
  startedAt: Date | null = null;
  endedWith: EndReason | null = null;
  observations: ConnectionObservation[] = [];
  endNow = false;
  async joined() {
    this.joinedAt = performance.now();
  }
  async started(at: Date) {
    this.startedAt = at;
  }
  async heartbeat() {
    return { ended: this.endNow };
  }
  async observe(o: ConnectionObservation) {
    this.observations.push(o);
  }
  async ended(reason: EndReason) {
    this.endedWith = reason;
  }
}

function playback(): AvatarPlayback {
  return loopOnlyPlayback(loopKey, { avatarId: 'ava_test', tenantId: 'ten_test', displayName: 'Grace' });
}

function spec(roomName: string, over: Partial<CallSpec> = {}): CallSpec {
  return {
    sessionId: `ses_${roomName}`,
    tenantId: 'ten_test',
    mode: 'provider',
    roomName,
    avatarIdentity: 'avatar-1',
    avatarName: 'Grace',
    agentIdentity: 'agent-1',
    userIdentity: null,
    maxDurationSeconds: 120,
    record: false,
    body: { kind: 'avatar', playback: playback() },
    ownsRoom: true,
    ...over,
  };
}

/** An agent participant speaking to the avatar through agents-js's own sender, as a LiveKit agent would. */
async function agentSender(roomName: string, o: { waitPlaybackStart?: boolean } = {}) {
  const room = new Room();
  await room.connect(url, await token(roomName, 'agent-1', { agent: true }), { autoSubscribe: false, dynacast: false });
  // agents-js registers its playback handlers once per process: let this room register its own.
  voice.DataStreamAudioOutput._playbackFinishedRpcRegistered = false;
  voice.DataStreamAudioOutput._playbackStartedRpcRegistered = false;
  const output = new voice.DataStreamAudioOutput({
    room,
    destinationIdentity: 'avatar-1',
    waitRemoteTrack: TrackKind.KIND_VIDEO,
    ...(o.waitPlaybackStart ? { waitPlaybackStart: true } : {}),
  });
  const say = async (pcm: Int16Array, sampleRate: number) => {
    const step = Math.round(sampleRate / 50);
    for (let i = 0; i < pcm.length; i += step) {
      const part = pcm.subarray(i, Math.min(pcm.length, i + step));
      await output.captureFrame(new AudioFrame(part.slice(), sampleRate, 1, part.length));
    }
    output.flush();
  };
  return { room, output, say };
}

/**
 * 300 ms tone bursts every 810 ms, for clean audio onsets. Not a multiple of the 40 ms frame: each
 * burst starts at another phase of the frame grid, so the median offset is not one phase's rounding.
 */
const BURST_PERIOD = 0.81;
function bursts(sampleRate: number, count: number): Int16Array {
  const pcm = new Int16Array(Math.round(sampleRate * BURST_PERIOD * count));
  for (let b = 0; b < count; b++) {
    const start = Math.round(sampleRate * (BURST_PERIOD * b + 0.2));
    for (let i = 0; i < sampleRate * 0.3; i++)
      pcm[start + i] = Math.round(9000 * Math.sin((2 * Math.PI * 330 * i) / sampleRate));
  }
  return pcm;
}

describe('avatar host on the real LiveKit server', () => {
  it(
    'publishes 25 fps video of the loop size, speaks what its agent sends in sync, answers the avatar protocol, and ends when the user leaves',
    { timeout: 90_000 },
    async () => {
      const roomName = `host-${Date.now()}`;
      await rooms.createRoom({ name: roomName, emptyTimeout: 60 });
      const reporter = new MemoryReporter();
      const runner = await host.startCall(spec(roomName), reporter, null);
      expect(reporter.joinedAt).not.toBeNull();

      const viewer = new Viewer('avatar-1');
      await viewer.join(url, roomName, 'user-1');
      await expect.poll(() => reporter.startedAt, { timeout: 10_000 }).not.toBeNull();
      await expect.poll(() => viewer.frames.length, { timeout: 15_000 }).toBeGreaterThan(30);

      // Idle: frames at the avatar's size and rate, marker dark (no speech).
      const idleFrom = performance.now();
      const shownBefore = host.tickStats.shown;
      await new Promise((r) => setTimeout(r, 3000));
      const idleFps = viewer.fps(idleFrom);
      const publishedFps = ((host.tickStats.shown - shownBefore) * 1000) / (performance.now() - idleFrom);
      // Published at 25 fps; received at close to that (the viewer decodes on the same, maybe busy, cores).
      expect(publishedFps, 'frames published per second').toBeGreaterThanOrEqual(24);
      expect(idleFps, 'frames received per second at the viewer').toBeGreaterThanOrEqual(20);
      expect(viewer.frames.at(-1)).toMatchObject({ width: 512, height: 512, marker: false });
      // H.264 by default (half VP8's encode CPU), which every WebRTC browser decodes.
      expect(viewer.videoMimeType?.toLowerCase()).toBe('video/h264');

      const sender = await agentSender(roomName);
      // Bursts at 16 kHz: the avatar resamples to its own rate.
      const sentAt = performance.now();
      await sender.say(bursts(16_000, 6), 16_000);
      const played = await sender.output.waitForPlayout();
      expect(played.interrupted).toBe(false);
      expect(played.playbackPosition).toBeCloseTo(6 * BURST_PERIOD, 1);

      // A/V sync at the viewer: each audio onset against the marker's onset. A frame is published 30 ms after its
      // audio leaves the audio queue (the audio's longer way to the viewer); the receiver does not re-align them.
      // Bursts are 300 ms on, 500 ms off: an onset needs 350 ms of quiet before it (a dropout inside a burst is not one).
      const audioOn = onsets(
        viewer.audio.filter((a) => a.at > sentAt).map((a) => ({ at: a.at, on: a.level > 1500 })),
        350,
      );
      const videoOn = onsets(
        viewer.frames.filter((f) => f.at > sentAt).map((f) => ({ at: f.at, on: f.marker })),
        350,
      );
      // Six bursts; a loaded machine may stall the viewer through one, so each video onset is paired with
      // the audio onset nearest it (bursts are 810 ms apart: within 400 ms is the same burst).
      expect(audioOn.length).toBeLessThanOrEqual(6);
      const offsets = videoOn
        .map((v) => audioOn.reduce((best, a) => (Math.abs(v - a) < Math.abs(best) ? v - a : best), Infinity))
        .filter((o) => Math.abs(o) < 400);
      expect(offsets.length, `paired onsets (audio ${audioOn.length}, video ${videoOn.length})`).toBeGreaterThanOrEqual(
        4,
      );
      const median = [...offsets].sort((a, b) => a - b)[Math.floor(offsets.length / 2)]!;
      const measured = `A/V offsets at the viewer (video − audio, ms): ${offsets.map((o) => o.toFixed(0)).join(' ')}`;
      // Within what viewers can detect (about 45 ms); the median, so one stall of a loaded machine does not decide.
      expect(Math.abs(median), measured).toBeLessThan(45);

      // Speech: the mouth moves; interrupted half way, it stops at once and the agent is told how far it got.
      const speech = await synthesize({
        text: 'Hello there. I am reading a long sentence so that it can be interrupted in the middle of it.',
      });
      const speechFrom = performance.now();
      const speaking = sender.say(speech.samples, speech.sampleRate);
      await speaking;
      await new Promise((r) => setTimeout(r, 1500));
      const clearAt = performance.now();
      sender.output.clearBuffer();
      const cut = await sender.output.waitForPlayout();
      expect(cut.interrupted).toBe(true);
      expect(cut.playbackPosition).toBeGreaterThan(0.8);
      expect(cut.playbackPosition).toBeLessThan(speech.durationSeconds - 1);
      await new Promise((r) => setTimeout(r, 600));
      const lastLoud = viewer.audio.filter((a) => a.level > 300).at(-1)!.at;
      expect(lastLoud - clearAt, 'audio after the interruption, ms').toBeLessThan(200);
      const during = viewer.frames.filter((f) => f.at > speechFrom + 400 && f.at < clearAt).map((f) => f.mouthLuma);
      const spread = Math.max(...during) - Math.min(...during);
      expect(spread, 'mouth region changes while speaking').toBeGreaterThan(3);
      expect(host.renderer.stats.drawn).toBeGreaterThan(10);

      // The user leaves: the call ends, is reported once, and its room is gone.
      await viewer.leave();
      expect(await runner.ended).toBe('user_left');
      expect(reporter.endedWith).toBe('user_left');
      expect(reporter.observations.map((o) => `${o.role}:${o.kind}`)).toEqual(
        expect.arrayContaining(['avatar:joined', 'user:joined', 'user:left', 'agent:joined']),
      );
      await expect.poll(async () => (await rooms.listRooms([roomName])).length, { timeout: 10_000 }).toBe(0);
      await sender.room.disconnect();
    },
  );

  it(
    'ends a call whose end cannot be reported (the database hangs): it leaves the room and frees its slot all the same',
    { timeout: 60_000 },
    async () => {
      const roomName = `host-hang-${Date.now()}`;
      await rooms.createRoom({ name: roomName, emptyTimeout: 60 });
      class HangingReporter extends MemoryReporter {
        override ended(): Promise<void> {
          return new Promise(() => {});
        }
      }
      const runner = await host.startCall(
        spec(roomName, { avatarIdentity: 'avatar-hang' }),
        new HangingReporter(),
        null,
      );
      expect(host.calls).toContain(runner);
      const endedAt = performance.now();
      await runner.end('released');
      expect(performance.now() - endedAt, 'ms to end, the report given up after its bound').toBeLessThan(15_000);
      expect(host.calls).not.toContain(runner);
      // It left the room, which it closed (the call owns it).
      await expect.poll(async () => (await rooms.listRooms([roomName])).length, { timeout: 10_000 }).toBe(0);
    },
  );

  it(
    "draws a neural model's lower face from the audio each frame plays with, and nothing while the avatar is silent",
    { timeout: 90_000 },
    async () => {
      // A stand-in of FaceFusion's wav2lip_96 (batch fixed at 1: one run per frame) in a lip-sync thread, as the worker runs it.
      const lipsync = await createLipSyncThread(
        fileURLToPath(new URL('../../render/lipsync/fixtures/facefusion_wav2lip_96.onnx', import.meta.url)),
      );
      const neural = new AvatarHost({
        lipsync,
        vad: null,
        storage,
        livekit: { url, apiKey: DEV_KEY, apiSecret: DEV_SECRET },
        log: createLogger('silent'),
        workDir: work,
        heartbeatMs: 500,
      });
      try {
        const roomName = `host-neural-${Date.now()}`;
        await rooms.createRoom({ name: roomName, emptyTimeout: 60 });
        const runner = await neural.startCall(spec(roomName), new MemoryReporter(), null);
        const viewer = new Viewer('avatar-1');
        await viewer.join(url, roomName, 'user-1');
        await expect.poll(() => viewer.frames.length, { timeout: 15_000 }).toBeGreaterThan(30);
        expect(neural.renderer.stats.drawn, 'frames drawn in silence').toBe(0);

        const sender = await agentSender(roomName);
        const speech = await synthesize({ text: 'Hello there, I am speaking through a neural model.' });
        const speechFrom = performance.now();
        await sender.say(speech.samples, speech.sampleRate);
        expect((await sender.output.waitForPlayout()).interrupted).toBe(false);
        const speechTo = performance.now();
        // Most of the speech's frames drawn (a frame whose window is all silence is not), and the mouth moves.
        expect(neural.renderer.stats.drawn).toBeGreaterThan(speech.durationSeconds * 25 * 0.6);
        const during = viewer.frames.filter((f) => f.at > speechFrom + 400 && f.at < speechTo).map((f) => f.mouthLuma);
        expect(Math.max(...during) - Math.min(...during), 'mouth region changes while speaking').toBeGreaterThan(3);

        await viewer.leave();
        expect(await runner.ended).toBe('user_left');
        await sender.room.disconnect();
      } finally {
        await neural.close();
        await lipsync.release();
      }
    },
  );

  it(
    'tells a sender that waits for it when each segment starts playing, answers clear_buffer with nothing playing, and gets over a stream whose end marker is lost',
    { timeout: 90_000 },
    async () => {
      const roomName = `host-protocol-${Date.now()}`;
      await rooms.createRoom({ name: roomName, emptyTimeout: 60 });
      const runner = await host.startCall(spec(roomName), new MemoryReporter(), null);
      const viewer = new Viewer('avatar-1');
      await viewer.join(url, roomName, 'user-1');
      await expect.poll(() => viewer.frames.length, { timeout: 15_000 }).toBeGreaterThan(10);

      // agents-js's sender with waitPlaybackStart: its playbackStarted comes from our lk.playback_started.
      const sender = await agentSender(roomName, { waitPlaybackStart: true });
      const startedAt: number[] = [];
      sender.output.on(voice.AudioOutput.EVENT_PLAYBACK_STARTED, () => startedAt.push(performance.now()));
      // Nothing plays yet: clear_buffer is answered all the same.
      const lp = sender.room.localParticipant!;
      expect(await lp.performRpc({ destinationIdentity: 'avatar-1', method: RPC_CLEAR_BUFFER, payload: '' })).toBe(
        'ok',
      );
      // Two segments sent at once (faster than real time): the second starts when the first has played.
      const sentAt = performance.now();
      await sender.say(bursts(16_000, 2).subarray(0, Math.round(16_000 * BURST_PERIOD * 1.5)), 16_000);
      await new Promise((r) => setTimeout(r, 100));
      await sender.say(bursts(16_000, 1), 16_000);
      const sentBoth = performance.now() - sentAt;
      expect((await sender.output.waitForPlayout()).interrupted).toBe(false);
      expect(startedAt, 'playbackStarted events').toHaveLength(2);
      const firstHeard = viewer.audio.find((a) => a.at > sentAt && a.level > 1500)!.at;
      // The first burst begins 200 ms into the segment.
      const heardStart = firstHeard - 200;
      const measured = `started ${startedAt.map((t) => (t - sentAt).toFixed(0)).join(', ')} ms after sending (sent in ${sentBoth.toFixed(0)} ms); the viewer heard its start at ${(heardStart - sentAt).toFixed(0)} ms`;
      // Told as it plays (the viewer hears it a few tens of ms later), not when it was sent.
      expect(Math.abs(startedAt[0]! - heardStart), measured).toBeLessThan(150);
      expect(startedAt[1]! - startedAt[0]!, measured).toBeGreaterThan(1.5 * BURST_PERIOD * 1000 - 150);
      expect(startedAt[1]! - startedAt[0]!, measured).toBeLessThan(1.5 * BURST_PERIOD * 1000 + 250);

      // The same agent, now sending rtc-node streams of its own; its first stream's end never arrives.
      const raw = sender.room;
      raw.localParticipant!.unregisterRpcMethod(RPC_PLAYBACK_FINISHED);
      const finished: { position: number; at: number }[] = [];
      raw.localParticipant!.registerRpcMethod(RPC_PLAYBACK_FINISHED, async (data: RpcInvocationData) => {
        finished.push({
          position: (JSON.parse(data.payload) as { playback_position: number }).playback_position,
          at: performance.now(),
        });
        return 'ok';
      });
      const open = (name: string) =>
        raw.localParticipant!.streamBytes({
          name,
          topic: AUDIO_STREAM_TOPIC,
          destinationIdentities: ['avatar-1'],
          attributes: { sample_rate: '16000', num_channels: '1' },
        });
      const tone = bursts(16_000, 1);
      const lost = await open('lost');
      await lost.write(new Uint8Array(tone.buffer));
      // Its end marker never comes; the next stream does.
      await new Promise((r) => setTimeout(r, 300));
      const nextAt = performance.now();
      const next = await open('next');
      await next.write(new Uint8Array(tone.buffer));
      await next.close();
      await waitFor(
        `both streams answered (${JSON.stringify(finished)})`,
        () => (finished.length === 2 ? true : undefined),
        {
          timeoutMs: 10_000,
        },
      );
      // The lost one played what it got, then the next one played in full.
      expect(finished[0]!.position).toBeCloseTo(BURST_PERIOD, 1);
      expect(finished[1]!.position).toBeCloseTo(BURST_PERIOD, 1);
      const heardNext = onsets(
        viewer.audio.filter((a) => a.at > nextAt).map((a) => ({ at: a.at, on: a.level > 1500 })),
        350,
      );
      expect(heardNext.length, 'tone onsets heard after the next stream').toBeGreaterThanOrEqual(1);

      await viewer.leave();
      expect(await runner.ended).toBe('user_left');
      await raw.disconnect();
    },
  );

  it(
    'records the call in sync from its first frame though its recording starts late (a slow database), and `npm run call` records what its user received in sync',
    { timeout: 120_000 },
    async () => {
      const roomName = `host-rec-${Date.now()}`;
      await rooms.createRoom({ name: roomName, emptyTimeout: 60 });
      let stored: { key: string; seconds: number } | null = null;
      const sink: CallRecordingSink = {
        // As slow as a worker's first write to its database: frames are shown meanwhile.
        begin: async () => {
          await new Promise((r) => setTimeout(r, 300));
          return { recordingId: 'rec_1', storageKey: `recordings/${roomName}.mp4` };
        },
        ready: async (_id, info) =>
          void (stored = { key: `recordings/${roomName}.mp4`, seconds: info.durationSeconds }),
        failed: async (_id, reason) => {
          throw new Error(`recording failed: ${reason}`);
        },
      };
      const runner = await host.startCall(spec(roomName, { record: true }), new MemoryReporter(), sink);
      // The user is the terminal client, writing what it receives to an MP4.
      const cliFile = path.join(work, `${roomName}-cli.mp4`);
      const user = startEntryPoint(
        'cli/call.ts',
        {},
        {
          args: ['--url', url, '--token', await token(roomName, 'user-cli'), '--out', cliFile, '--seconds', '14'],
        },
      );
      try {
        await waitFor(
          () => `the client to see the avatar:\n${user.output()}`,
          () => (user.lines.some((l) => l.text.includes('avatar video')) ? true : undefined),
          { timeoutMs: 30_000 },
        );
        await new Promise((r) => setTimeout(r, 1000));
        const sender = await agentSender(roomName);
        await sender.say(bursts(16_000, 8), 16_000);
        expect((await sender.output.waitForPlayout()).interrupted).toBe(false);
        const exit = await user.exited;
        expect(exit.code, user.output()).toBe(0);
        expect(await runner.ended).toBe('user_left');
        await waitFor('the recording', () => stored ?? undefined, { timeoutMs: 30_000 });
        await sender.room.disconnect();
      } finally {
        if (user.child.exitCode === null) user.child.kill('SIGKILL');
      }

      const serverFile = path.join(work, `${roomName}-server.mp4`);
      const chunks: Buffer[] = [];
      for await (const c of await storage.get(stored!.key)) chunks.push(c as Buffer);
      writeFileSync(serverFile, Buffer.concat(chunks));
      // The server's file is on the call's clock: frame n at n / 25 s, the audio at its playout
      // position; the marker turns white on the first frame whose middle is speech (within half a
      // frame). Frames the call skipped (late ticks on a busy machine) are the frame before them, as
      // viewers saw them: an onset can come a few frames late, not the file as a whole. A recording
      // whose first frames went missing (its start took 300 ms here) was early by all of them.
      const server = await mp4SyncOffsets(serverFile);
      const serverMeasured = `server recording, A/V offsets (video − audio, ms): ${server.offsets.map((o) => o.toFixed(0)).join(' ')}`;
      expect(server.offsets.length, serverMeasured).toBeGreaterThanOrEqual(4);
      expect(Math.abs(median(server.offsets)), serverMeasured).toBeLessThan(50);
      expect(Math.min(...server.offsets), serverMeasured).toBeGreaterThan(-50);

      // The client's file: each frame at the time it was received, the audio as it was heard.
      const cli = await mp4SyncOffsets(cliFile);
      const cliMeasured = `client recording, A/V offsets (video − audio, ms): ${cli.offsets.map((o) => o.toFixed(0)).join(' ')}`;
      expect(cli.offsets.length, cliMeasured).toBeGreaterThanOrEqual(4);
      // As a viewer sees it live (host test above: within 45 ms), with a frame's rounding on top.
      expect(Math.abs(median(cli.offsets)), cliMeasured).toBeLessThan(80);
    },
  );
});
