import { readFileSync, writeFileSync } from 'node:fs';
import { initializeLogger } from '@livekit/agents';
import { Room, type RpcInvocationData } from '@livekit/rtc-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startAgentHarness, RELEASE, type AgentHarness, type Grant } from '../test/agent-harness.ts';
import { freePort, startLiveKit, type RunningServer } from '../test/deps.ts';
import { messageText, type ChatReply, type ChatRequest, type TranscriptionReply } from '../test/fakes/openai.ts';
import { waitFor } from '../test/helpers.ts';
import { startEntryPoint } from '../test/processes.ts';
import { AUDIO_STREAM_TOPIC, RPC_CLEAR_BUFFER, RPC_PLAYBACK_FINISHED } from './avatar/receiver.ts';
import { avatarLoudAfter, speech, token, Viewer, type Microphone, type WorkerProcess } from './test-support.ts';
import { LLM_FAILED_LINE } from './voice/job.ts';

/**
 * Faults of live calls, end to end: the API (in this process, LiveKit's webhooks reaching it), a
 * LiveKit server of this file's own (it is restarted in the last case), agent worker processes,
 * and the local OpenAI-compatible server as the LLM and STT, scripted to fail and hang. For each
 * fault, the call ends or degrades cleanly, is settled exactly once (ledger invariants hold, its
 * capacity slot is freed), and the worker goes on serving its other calls: a bystander call in the
 * same worker keeps its video flowing and is answered during and after the fault.
 */
initializeLogger({ pretty: false, level: 'warn' });

/** Short upstream limits, so that a silent model is given up on within seconds. */
const WORKER_ENV = { LLM_TIMEOUT_SECONDS: '2', STT_TIMEOUT_SECONDS: '2' };
/** A worker silent this long has lost its calls (API and workers alike): seconds, not a minute. */
const HEARTBEAT_TIMEOUT_SECONDS = 6;
/**
 * The most a call's video may pause while another call of its worker fails: a few seconds on a
 * loaded 2-core machine (a stalled or crashed worker pauses it for good).
 */
const MAX_FRAME_GAP_MS = 4000;

let h: AgentHarness;
let lk: RunningServer;
let lkPort: number;
let worker: WorkerProcess;
const logs: string[] = [];

/** What the fake STT answers to the next utterance (set before each one is spoken). */
let heard: TranscriptionReply = { text: '' };
/**
 * The audio `heard` went to: its retry is answered the same, while another piece of the same
 * utterance (the STT's VAD can cut it at its comma) hears nothing, as a real STT would hear no
 * second question in it.
 */
let heardAudio: Buffer | null = null;
/** The fake LLM's answer by what the user said last: a fault for the words a case scripts, a short answer otherwise. */
const chatFaults = new Map<string, () => ChatReply>();
const NORMAL_ANSWER = 'Sure, happy to help.';

type Speech = Awaited<ReturnType<typeof speech>>;
/** What the users say (the fake STT decides what it heard). */
let question: Speech;
let bystanderLine: Speech;

interface UserCall {
  call: Grant;
  viewer: Viewer;
  mic: Microphone;
}
let bystander: UserCall;

beforeAll(async () => {
  lkPort = await freePort();
  h = await startAgentHarness({
    livekitUrl: `ws://127.0.0.1:${lkPort}`,
    env: { LIVE_HEARTBEAT_TIMEOUT_SECONDS: String(HEARTBEAT_TIMEOUT_SECONDS) },
  });
  lk = await startLiveKit({ port: lkPort, webhookUrls: [h.webhookUrl] });
  h.fake.script = {
    transcribe: (req) => {
      if (heardAudio && !heardAudio.equals(req.audio)) return { text: '' };
      heardAudio = req.audio;
      return heard;
    },
    chat: (req) => {
      const said = lastUserText(req);
      for (const [words, reply] of chatFaults) if (said.includes(words)) return reply();
      return { text: NORMAL_ANSWER };
    },
  };
  question = await speech('Hello, can you tell me something?');
  bystanderLine = await speech('I am still here, are you?');
  worker = await h.startWorker(WORKER_ENV);
  bystander = await startCall();
}, 180_000);

// A failed case leaves its call open: end it (the bystander goes on), so the next case starts clean.
afterEach(() => h.endOpenCalls([bystander.call.session_id]));

afterAll(async () => {
  logs.push(worker?.logs() ?? '');
  if (process.env.WORKER_LOG) writeFileSync(process.env.WORKER_LOG, logs.join('\n'));
  await h?.close();
  await lk?.stop();
});

/** A call as a customer's user starts it: minted, joined, the avatar's video arriving, its voice agent listening. */
async function startCall(): Promise<UserCall> {
  const call = await h.mintCall({ max_duration_seconds: 300 });
  const { viewer, mic } = await h.joinAsUser(call);
  await waitFor(
    () => `the avatar video of ${call.session_id}; ${worker.diagnosis(2_000)}`,
    () => (viewer.frames.length > 10 ? true : undefined),
    { timeoutMs: 60_000 },
  );
  // The voice agent says it listens (agents-js's participant attribute) once it hears the user.
  const listening = () =>
    [...viewer.room.remoteParticipants.values()].some((p) => p.attributes['lk.agent.state'] === 'listening');
  await waitFor(
    () => `the voice agent of ${call.session_id} to listen; ${worker.diagnosis(2_000)}`,
    () => (listening() ? true : undefined),
    { timeoutMs: 60_000 },
  );
  return { call, viewer, mic };
}

/** The user says something the fake STT hears as `text` (or fails on); resolves when it has been said, with when. */
async function say(u: UserCall, reply: TranscriptionReply, pcm = question.pcm): Promise<number> {
  heard = reply;
  heardAudio = null;
  await u.mic.speak(pcm);
  return u.mic.spoken.at(-1)!.end;
}

/** Waits for the avatar of `u` to speak after `after` (ms); answers when. */
function answered(u: UserCall, after: number, what: string, timeoutMs = 30_000): Promise<number> {
  return waitFor(
    () => `${what}; ${worker.diagnosis(3_000)}`,
    () => avatarLoudAfter(u.viewer, after),
    { timeoutMs },
  );
}

/** The longest pause in the video `v` received from `since` until now: how long (ms), and when it began (ms after `since`). */
function longestFrameGap(v: Viewer, since: number): { ms: number; after: number } {
  const times = [since, ...v.frames.filter((f) => f.at > since).map((f) => f.at), performance.now()];
  let gap = { ms: 0, after: 0 };
  for (let i = 1; i < times.length; i++)
    if (times[i]! - times[i - 1]! > gap.ms)
      gap = { ms: Math.round(times[i]! - times[i - 1]!), after: Math.round(times[i - 1]! - since) };
  return gap;
}

/** The bystander's video flowed since `since`, and it is answered now. */
async function bystanderServed(since: number, when: string): Promise<void> {
  const gap = longestFrameGap(bystander.viewer, since);
  expect(gap.ms, `the bystander's longest video pause (ms) ${when}, ${gap.after} ms in`).toBeLessThan(MAX_FRAME_GAP_MS);
  const asked = await say(bystander, { text: `Bystander here, ${when}.` }, bystanderLine.pcm);
  await answered(bystander, asked, `the bystander's answer ${when}`);
}

const sessionEnd = async (id: string) => (await h.t.services.liveSessions.get(id))?.endReason;
const lastUserText = (req: ChatRequest) =>
  messageText([...req.messages].reverse().find((m) => m.role === 'user') ?? { role: 'user' });

describe('faults of live calls', () => {
  it(
    'the user vanishes (their client killed, no release): the call ends user_left and is settled once; the other call goes on',
    { timeout: 90_000 },
    async () => {
      const call = await h.mintCall({ max_duration_seconds: 300 });
      // The user is the terminal client (`npm run call`), killed outright: no leave, no release.
      const user = startEntryPoint(
        'cli/call.ts',
        {},
        { args: ['--url', call.server_url, '--token', call.participant_token, '--seconds', '300'] },
      );
      try {
        await waitFor(
          () => `the user's client to see the avatar:\n${user.output()}`,
          () => (user.lines.some((l) => l.text.includes('avatar video')) ? true : undefined),
          { timeoutMs: 60_000 },
        );
        await waitFor('the call to start', async () =>
          (await h.t.services.liveSessions.get(call.session_id))?.state === 'active' ? true : undefined,
        );
        const vanished = performance.now();
        user.child.kill('SIGKILL');
        await user.exited;
        const { session, usage } = await h.settledOnce(call.session_id);
        expect(session.endReason).toBe('user_left');
        expect(usage.status).toBe('released');
        await bystanderServed(vanished, 'after a user vanished');
      } finally {
        if (user.child.exitCode === null) user.child.kill('SIGKILL');
      }
    },
  );

  it(
    'the LLM hangs (no answer, or an answer that stops mid-way): the avatar says it cannot answer within the LLM timeout, and the call goes on',
    { timeout: 120_000 },
    async () => {
      const u = await startCall();
      try {
        // No answer at all: given up after LLM_TIMEOUT_SECONDS, retried once, then the apology.
        chatFaults.set('weather', () => ({ hang: true }));
        const before = h.fake.chatRequests.length;
        const asked = await say(u, { text: 'What is the weather like?' });
        // Meanwhile the bystander's LLM answers it.
        await waitFor('the hanging LLM request', () => (h.fake.chatRequests.length > before ? true : undefined));
        await bystanderServed(asked, 'while the LLM hangs for another call');
        const apology = await waitFor(
          () => `the apology; transcripts: ${JSON.stringify(u.viewer.transcripts)}`,
          () => u.viewer.transcripts.find((t) => t.at > asked && t.text === LLM_FAILED_LINE),
          { timeoutMs: 30_000 },
        );
        // Two attempts of 2 s each and the retry's pause: neither sooner nor much later.
        expect(apology.at - asked).toBeGreaterThan(4000);
        expect(apology.at - asked).toBeLessThan(20_000);
        expect(
          h.fake.chatRequests.slice(before).filter((r) => r.messages.map(messageText).join(' ').includes('weather')),
        ).toHaveLength(2);

        // An answer that starts, then stalls: what came is spoken, then the apology (no retry: part of it was said).
        chatFaults.set('compilers', () => ({
          text: 'Compilers are programs that translate code into other code.',
          chunkChars: 8,
          holdAfter: { chars: 16, until: new Promise(() => {}) },
        }));
        const asked2 = await say(u, { text: 'Tell me about compilers.' });
        await waitFor(
          () => `the apology after the stall; transcripts: ${JSON.stringify(u.viewer.transcripts)}`,
          () => u.viewer.transcripts.find((t) => t.at > asked2 && t.text === LLM_FAILED_LINE),
          { timeoutMs: 30_000 },
        );
        expect(u.viewer.transcripts.filter((t) => t.at > asked2).map((t) => t.text)).toContainEqual(
          expect.stringMatching(/^Compilers are/),
        );

        // The call goes on: the next question is answered.
        const asked3 = await say(u, { text: 'Are you still there?' });
        await waitFor(
          () => `the answer after the faults; transcripts: ${JSON.stringify(u.viewer.transcripts)}`,
          () => u.viewer.transcripts.find((t) => t.at > asked3 && t.text === NORMAL_ANSWER),
          { timeoutMs: 30_000 },
        );
        expect((await h.t.services.liveSessions.get(u.call.session_id))?.state).toBe('active');
        await bystanderServed(asked, 'after the LLM hung for another call');

        await u.mic.close();
        await u.viewer.leave();
        const { session } = await h.settledOnce(u.call.session_id);
        expect(session.endReason).toBe('user_left');
      } finally {
        chatFaults.clear();
        await u.viewer.leave().catch(() => {});
      }
    },
  );

  it(
    'speech to text fails (HTTP 500) or hangs: that utterance is lost, the next one is answered, and the call goes on',
    { timeout: 120_000 },
    async () => {
      const u = await startCall();
      try {
        const before = h.fake.transcriptionRequests.length;
        const chatsBefore = h.fake.chatRequests.length;
        const failed = await say(u, { fail: { status: 500, message: 'stt down' } });
        await waitFor('the failed transcription', () =>
          h.fake.transcriptionRequests.length > before ? true : undefined,
        );
        const asked = await say(u, { text: 'Can you hear me now?' });
        await answered(u, asked, 'the answer after the STT failed');
        // The failed utterance was dropped: no turn for it, the avatar silent until the next one.
        expect(h.fake.chatRequests.slice(chatsBefore).map(lastUserText)).toEqual(['Can you hear me now?']);
        expect(avatarLoudAfter(u.viewer, failed)).toBeGreaterThan(asked);

        // It hangs: the bystander (its own STT requests answered) is served meanwhile; the hung
        // utterance is given up after STT_TIMEOUT_SECONDS and the next one is answered.
        const hangBefore = h.fake.transcriptionRequests.length;
        const hung = await say(u, { hang: true });
        await waitFor('the hanging transcription', () =>
          h.fake.transcriptionRequests.length > hangBefore ? true : undefined,
        );
        await bystanderServed(hung, 'while STT hangs for another call');
        const asked2 = await say(u, { text: 'Hello again, are you there?' });
        const replyAt = await answered(u, asked2, 'the answer after the STT hung');
        expect(replyAt - asked2, 'the reply after a hung STT (ms)').toBeLessThan(15_000);
        await waitFor(
          () => `the answer's transcript; transcripts: ${JSON.stringify(u.viewer.transcripts)}`,
          () => u.viewer.transcripts.find((t) => t.at > asked2 && t.text === NORMAL_ANSWER),
        );

        await u.mic.close();
        await u.viewer.leave();
        const { session } = await h.settledOnce(u.call.session_id);
        expect(session.endReason).toBe('user_left');
      } finally {
        await u.viewer.leave().catch(() => {});
      }
    },
  );

  it(
    'provider mode: malformed and oversized audio streams from the agent are answered and bounded, the avatar plays the next valid one, and nothing else is disturbed',
    { timeout: 120_000 },
    async () => {
      const roomName = `customer-faults-${Date.now()}`;
      await h.rooms.createRoom({ name: roomName, emptyTimeout: 120 });
      const agent = new Room();
      await agent.connect(h.livekitUrl, await token(roomName, 'customer-agent', { agent: true }), {
        autoSubscribe: false,
        dynacast: false,
      });
      const finished: { playback_position: number; interrupted: boolean; at: number }[] = [];
      agent.localParticipant!.registerRpcMethod(RPC_PLAYBACK_FINISHED, async (data: RpcInvocationData) => {
        finished.push({
          ...(JSON.parse(data.payload) as { playback_position: number; interrupted: boolean }),
          at: performance.now(),
        });
        return 'ok';
      });
      const call = await h.mintCall({
        room: { name: roomName, agent_identity: 'customer-agent' },
        max_duration_seconds: 300,
      });
      const viewer = new Viewer(call.avatar_identity);
      try {
        await viewer.join(h.livekitUrl, roomName, 'customer-user');
        await waitFor('the avatar video in the customer room', () => (viewer.frames.length > 10 ? true : undefined), {
          timeoutMs: 60_000,
        });
        const rssBefore = rssMiB(worker.pid);
        const since = performance.now();
        const sinceEpoch = Date.now();

        /** Sends one stream to the avatar; resolves with the avatar's answer to it. */
        const send = async (attributes: Record<string, string> | undefined, chunks: Uint8Array[]) => {
          const n = finished.length;
          const writer = await agent.localParticipant!.streamBytes({
            topic: AUDIO_STREAM_TOPIC,
            destinationIdentities: [call.avatar_identity],
            ...(attributes ? { attributes } : {}),
          });
          for (const c of chunks) await writer.write(c);
          await writer.close();
          return () => finished[n];
        };
        const answerOf = (what: string, get: () => (typeof finished)[number] | undefined, timeoutMs = 30_000) =>
          waitFor(
            () =>
              `the avatar's answer to ${what}; answers so far: ${JSON.stringify(finished)}; ${worker.diagnosis(2_000)}`,
            get,
            { timeoutMs },
          );

        const pcmBytes = (pcm: Int16Array) => new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength);
        const some = pcmBytes(tone(16_000, 0.5));
        // Unusable formats: answered at once, as played at 0.
        const unusable: (Record<string, string> | undefined)[] = [
          undefined,
          { sample_rate: 'fast' },
          { sample_rate: '96000', num_channels: '1' },
          { sample_rate: '2000' },
          { sample_rate: '16000', num_channels: '3' },
        ];
        for (const attributes of unusable) {
          expect(
            await answerOf(`a stream with ${JSON.stringify(attributes)}`, await send(attributes, [some])),
          ).toMatchObject({ playback_position: 0, interrupted: false });
        }
        // Odd-sized chunks, an odd total, stereo at 44.1 kHz: what is whole plays, to its end.
        const stereo = pcmBytes(tone(44_100, 0.6, 2));
        const ragged = [
          stereo.subarray(0, 1001),
          stereo.subarray(1001, 5000),
          stereo.subarray(5000, 5003),
          stereo.subarray(5003, stereo.length - 1),
        ];
        const raggedAnswer = await answerOf(
          'a ragged stereo stream',
          await send({ sample_rate: '44100', num_channels: '2' }, ragged),
        );
        expect(raggedAnswer.interrupted).toBe(false);
        expect(raggedAnswer.playback_position).toBeGreaterThan(0.5);
        expect(raggedAnswer.playback_position).toBeLessThan(0.7);

        // Longer than any spoken answer (6 minutes, sent at once): the avatar keeps what it may hold
        // (5 minutes), says so, stops reading the rest, and the agent's clear ends it.
        const huge = pcmBytes(tone(8000, 6 * 60));
        const chunks: Uint8Array[] = [];
        for (let i = 0; i < huge.length; i += 64_000) chunks.push(huge.subarray(i, i + 64_000));
        const hugeAnswer = await send({ sample_rate: '8000', num_channels: '1' }, chunks);
        await waitFor(
          'the warning that the stream is over the bound',
          () => (worker.logs().includes('audio stream over what the avatar holds at once') ? true : undefined),
          { timeoutMs: 30_000 },
        );
        expect(
          await agent.localParticipant!.performRpc({
            destinationIdentity: call.avatar_identity,
            method: RPC_CLEAR_BUFFER,
            payload: '',
          }),
        ).toBe('ok');
        expect(await answerOf('the oversized stream, cleared', hugeAnswer)).toMatchObject({ interrupted: true });
        expect(rssMiB(worker.pid) - rssBefore, 'worker memory growth (MiB)').toBeLessThan(150);

        // The next valid stream plays in full, and the user hears it.
        const valid = question;
        const sentAt = performance.now();
        const validAnswer = await answerOf(
          'the valid stream',
          await send({ sample_rate: String(valid.sampleRate), num_channels: '1' }, [pcmBytes(valid.pcm)]),
        );
        expect(validAnswer.interrupted).toBe(false);
        expect(validAnswer.playback_position).toBeCloseTo(valid.seconds, 1);
        expect(avatarLoudAfter(viewer, sentAt)).toBeDefined();

        // The avatar never stopped: its video flowed throughout, and the bystander was served.
        const gap = longestFrameGap(viewer, since);
        expect(gap.ms, `the provider call's longest video pause (ms), ${gap.after} ms in`).toBeLessThan(
          MAX_FRAME_GAP_MS,
        );
        expect(errorsSince(worker, sinceEpoch)).toEqual([]);
        await bystanderServed(since, 'after malformed audio streams to another call');

        const released = await h.t.request('POST', RELEASE, { key: h.apiKey, body: { session_id: call.session_id } });
        expect(released.status).toBe(200);
        await h.settledOnce(call.session_id);
      } finally {
        await viewer.leave().catch(() => {});
        await agent.disconnect().catch(() => {});
        await h.rooms.deleteRoom(roomName).catch(() => {});
      }
    },
  );

  it(
    "the worker is killed mid-call and the API misses LiveKit's word of it: the janitor ends its calls (worker_lost) billed to their last heartbeat, settled once, slots freed; a fresh worker serves the next call",
    { timeout: 150_000 },
    async () => {
      const u = await startCall();
      // LiveKit's webhooks (the avatars leaving) do not reach the API: only the missing heartbeats tell.
      h.webhooksLost = true;
      try {
        const killed = worker;
        logs.push(killed.logs());
        expect(await killed.stop('SIGKILL')).toBeNull();
        const killedAt = Date.now();
        const ids = [u.call.session_id, bystander.call.session_id];
        const ended = await waitFor('the janitor to end the calls of the killed worker', async () => {
          await h.janitorPass();
          const reasons = await Promise.all(ids.map(sessionEnd));
          return reasons.every(Boolean) ? reasons : undefined;
        });
        expect(ended).toEqual(['worker_lost', 'worker_lost']);
        for (const id of ids) {
          const { session } = await h.settledOnce(id);
          expect(session.endedAt!.getTime(), 'billed to the last heartbeat').toBeLessThanOrEqual(killedAt);
          expect(session.endedAt!.getTime()).toBeGreaterThan(killedAt - HEARTBEAT_TIMEOUT_SECONDS * 1000);
        }
      } finally {
        h.webhooksLost = false;
      }
      await u.viewer.leave();
      await bystander.viewer.leave();

      worker = await h.startWorker(WORKER_ENV);
      bystander = await startCall();
      const asked = await say(bystander, { text: 'Is the new worker there?' });
      await answered(bystander, asked, 'an answer from the fresh worker');
    },
  );

  // Longer than its bounded waits together (settles 2 x 120 s, registration 60 s, the next call's video,
  // listening and answer): a slow step fails with its own message and the worker's log, not a bare timeout.
  it(
    'LiveKit restarts mid-call: the call is settled once, the worker registers again and serves the next call',
    { timeout: 480_000 },
    async () => {
      const u = bystander;
      const registered = () =>
        worker
          .logs()
          .split('\n')
          .filter((l) => l.includes('"msg":"agent worker registered')).length;
      const registrations = registered();
      await lk.stop();
      lk = await startLiveKit({ port: lkPort, webhookUrls: [h.webhookUrl] });
      // The room is gone with the server: the avatar's call ends (its agent and room went away).
      const { session } = await h.settledOnce(u.call.session_id);
      expect(['agent_left', 'room_closed', 'room_finished', 'user_left', 'avatar_left']).toContain(session.endReason);
      // What the WebRTC engine made of it is in the worker's log (its stderr, RUST_LOG=warn).
      expect(worker.logs()).toMatch(/(WARN|ERROR) +livekit\S*\] .*(connection|signal)/i);
      await u.viewer.leave().catch(() => {});
      await waitFor(
        () => `the worker to register again; ${worker.diagnosis(3_000)}`,
        () => (registered() > registrations ? true : undefined),
        { timeoutMs: 60_000 },
      );

      const next = await startCall();
      const asked = await say(next, { text: 'Hello after the restart.' });
      await answered(next, asked, 'an answer after LiveKit restarted');
      await next.mic.close();
      await next.viewer.leave();
      expect((await h.settledOnce(next.call.session_id)).session.endReason).toBe('user_left');
    },
  );
});

/** A 220 Hz tone of `seconds` at `sampleRate`, `channels` interleaved. */
function tone(sampleRate: number, seconds: number, channels = 1): Int16Array {
  const n = Math.round(sampleRate * seconds);
  const pcm = new Int16Array(n * channels);
  for (let i = 0; i < n; i++) {
    const v = Math.round(6000 * Math.sin((2 * Math.PI * 220 * i) / sampleRate));
    for (let c = 0; c < channels; c++) pcm[i * channels + c] = v;
  }
  return pcm;
}

/** Resident memory of a process, MiB. */
function rssMiB(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  return kb / 1024;
}

/** The errors (and worse) the worker and its job processes logged since `epochMs`, as `message: error`. */
function errorsSince(w: WorkerProcess, epochMs: number): string[] {
  return w
    .logs()
    .split('\n')
    .filter((l) => /"level":[56]0/.test(l))
    .map((l) => JSON.parse(l) as { time: number; msg: string; err?: { message?: string } })
    .filter((e) => e.time >= epochMs)
    .map((e) => `${e.msg}: ${e.err?.message ?? ''}`);
}
