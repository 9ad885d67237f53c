import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { initializeLogger, voice } from '@livekit/agents';
import { Room } from '@livekit/rtc-node';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { AvatarSession } from '../client/livekit.ts';
import { AvatarClient } from '../client/client.ts';
import { randomBase62 } from '../core/platform/ids.ts';
import { resolveFfmpegPath } from '../render/encode/index.ts';
import { startAgentHarness, MINT, RELEASE, type AgentHarness } from '../test/agent-harness.ts';
import { messageText } from '../test/fakes/openai.ts';
import { json, waitFor } from '../test/helpers.ts';
import {
  Viewer,
  avatarLoudAfter,
  contourMatch,
  loudnessContour,
  speech,
  thumbDistance,
  token,
  type WorkerProcess,
} from './test-support.ts';
import { EmbeddedTTS } from './voice/tts.ts';

/**
 * The agent worker end to end, as a customer runs it: calls minted and released through the API
 * (served on a real port, LiveKit's webhooks relayed to it), the real worker process, the real
 * LiveKit server, the real TTS and renderer, and a local OpenAI-compatible server standing in for
 * the paid STT and LLM. A user joins with the mint's token and microphone, talks to the avatar,
 * interrupts it, and releases the call; the database then holds the settled usage, the connection
 * history and the recording.
 */
initializeLogger({ pretty: false, level: 'warn' });
const url = inject('livekitUrl');
const PERSONA = 'You love compilers and you answer in one short sentence.';

let h: AgentHarness;
let worker: WorkerProcess;

/** How many frames the viewer received at each size (libwebrtc may scale a video down under load). */
function frameSizes(frames: readonly { width: number; height: number }[]): string {
  const counts = new Map<string, number>();
  for (const { width, height } of frames) {
    const size = `${width}x${height}`;
    counts.set(size, (counts.get(size) ?? 0) + 1);
  }
  return [...counts].map(([size, n]) => `${size}: ${n}`).join(', ');
}

/**
 * The first second of video as received, from its first frame: how many frames, the rate of the
 * intervals between them (a count alone swings by one with a single frame 40 ms late at either edge),
 * and the longest gap (a stall shows there).
 */
function firstSecond(arrivals: number[]): string {
  const first = arrivals[0]!;
  const within = arrivals.filter((t) => t >= first && t < first + 1000);
  const gaps = within.slice(1).map((t, i) => t - within[i]!);
  const rate = ((within.length - 1) * 1000) / (within.at(-1)! - first);
  const longest = gaps.indexOf(Math.max(...gaps));
  return `${within.length} frames, intervals at ${rate.toFixed(1)} fps, longest gap ${Math.round(gaps[longest]!)} ms after ${Math.round(within[longest]! - first)} ms`;
}

beforeAll(async () => {
  h = await startAgentHarness({
    recordings: true,
    avatar: { displayName: 'Grace', personality: PERSONA, loop: { seconds: 4, size: 512 } },
  });
  worker = await h.startWorker();
}, 180_000);

// A failed test leaves its call open: end it, so the next test starts clean.
afterEach(() => h.endOpenCalls());

afterAll(async () => {
  if (process.env.WORKER_LOG) writeFileSync(process.env.WORKER_LOG, worker?.logs() ?? '');
  await h?.close();
});

describe('the agent worker on the real LiveKit server', () => {
  // First: the start of a fresh worker's first call, the one that used to stall.
  it(
    "greets the user as they join, as written, with no STT or LLM call, hears a user who speaks over the greeting, and transcribes in the avatar's language",
    { timeout: 180_000 },
    async () => {
      const greeting =
        'Hello, I am Grace. I have been waiting for you, and I am glad you came. Ask me anything at all about compilers, and I will answer you as well as I can.';
      // French is refused by the API on this platform (its embedded TTS speaks English only): set in
      // the database, it shows what the worker does with an avatar's language.
      await h.t.services
        .sql`update avatars set settings = ${h.t.services.sql.json({ greeting, language: 'fr' })} where id = ${h.avatarId}`;
      try {
        h.fake.script = {
          transcribe: () => ({ text: 'Bonjour, qu’est-ce qu’un compilateur ?' }),
          chat: () => ({ text: 'Un compilateur traduit un programme.' }),
        };
        // A fresh worker, ready: its first voice process booted (a call that came sooner would wait for it).
        await waitFor("the worker's first voice process", () =>
          worker.logs().includes('voice process ready') ? true : undefined,
        );
        // What the user will say over the greeting, made now: synthesised once the greeting was heard,
        // on a busy machine it started to play 4 s later.
        const answer = await speech('Hello Grace, what is a compiler?');
        const sttBefore = h.fake.transcriptionRequests.length;
        const chatBefore = h.fake.chatRequests.length;
        const call = await h.mintCall();
        const joining = performance.now();
        const { viewer, mic } = await h.joinAsUser(call);

        // The greeting is heard soon after the user joins, as written, with nothing asked of the STT or
        // the LLM. The target is 1.5 s; measured alone on 2 cores it is 0.8 to 1.1 s (the avatar's own
        // join and its first playout; 3.5 s in a fresh CI clone before the TTS's leading pause was
        // cut), and the whole suite around it can slow it down, so the bar here is looser than the
        // target (docs/agent.md).
        const greetedAt = await waitFor(
          () => `the greeting; ${worker.diagnosis()}`,
          () => avatarLoudAfter(viewer, joining),
          { timeoutMs: 30_000 },
        );
        expect(greetedAt - joining, 'ms from the user joining to the greeting heard').toBeLessThan(5000);
        // The user sees the avatar as it greets them: the first frame came 3 to 4 s after the
        // greeting while every frame of the call's busy start was drawn late and dropped (frames.ts).
        const firstFrameAt = await waitFor(
          () => `the first frame; ${worker.diagnosis()}`,
          () => viewer.frames[0]?.at,
          { timeoutMs: 30_000 },
        );
        expect(firstFrameAt - greetedAt, 'ms from the greeting heard to the first frame seen').toBeLessThan(1500);
        expect(h.fake.transcriptionRequests.length - sttBefore, 'STT requests before the user spoke').toBe(0);
        expect(h.fake.chatRequests.length - chatBefore, 'LLM requests before the user spoke').toBe(0);

        // The user answers over the greeting (1 s into it): heard (transcribed, in the avatar's
        // language), and answered, with the greeting as written in what the LLM is told.
        await new Promise((r) => setTimeout(r, Math.max(0, greetedAt + 1000 - performance.now())));
        await mic.speak(answer.pcm);
        const asked = mic.spoken.at(-1)!;
        expect(asked.start, 'the user spoke during the greeting (it lasts about 9 s)').toBeLessThan(greetedAt + 3000);
        // (The greeting may still be playing: wait for the reply to be asked for, then heard.)
        await waitFor(
          () => `the LLM asked after the user spoke over the greeting; ${worker.diagnosis()}`,
          () => (h.fake.chatRequests.length > chatBefore ? true : undefined),
          { timeoutMs: 30_000 },
        );
        const replyAsked = Math.max(asked.end + 300, performance.now());
        const answeredAt = await waitFor(
          () => `the answer to the user who spoke over the greeting; ${worker.diagnosis()}`,
          () => avatarLoudAfter(viewer, replyAsked),
          { timeoutMs: 30_000 },
        );
        const stt = h.fake.transcriptionRequests.slice(sttBefore);
        expect(stt.length, 'the user was transcribed').toBeGreaterThanOrEqual(1);
        expect(stt[0]!.fields.language, "the STT request carries the avatar's language").toBe('fr');
        const sent = h.fake.chatRequests.at(-1)!;
        expect(messageText(sent.messages[0]!)).toContain('Always answer in French.');
        const said = sent.messages.filter((m) => m.role === 'assistant').map(messageText);
        expect(said[0], 'the greeting, in the chat history').toBeDefined();
        expect(greeting.startsWith(said[0]!.trim()), `greeting in the chat history: ${said[0]}`).toBe(true);
        expect(sent.messages.map(messageText).join('\n')).toContain('qu’est-ce qu’un compilateur');
        expect(answeredAt).toBeGreaterThan(asked.end);
        // The call's start as the user saw it (docs/agent.md): CALL_START_REPORT=1 prints it.
        if (process.env.CALL_START_REPORT) {
          const report = [
            `greeting heard after ${Math.round(greetedAt - joining)} ms`,
            `first frame after ${Math.round(firstFrameAt - joining)} ms`,
            `then ${viewer.fps(firstFrameAt, firstFrameAt + 1000).toFixed(1)} fps over 1 s`,
            `${viewer.fps(firstFrameAt, firstFrameAt + 3000).toFixed(1)} fps over 3 s`,
            `first second: ${firstSecond(viewer.frames.map((f) => f.at))}`,
            `frames received by size ${frameSizes(viewer.frames)}`,
          ];
          console.error(`call start: ${report.join('; ')}`);
        }

        await mic.close();
        await viewer.leave();
        await h.settledOnce(call.session_id);
      } finally {
        await h.t.services.sql`update avatars set settings = '{}'::jsonb where id = ${h.avatarId}`;
      }
    },
  );

  it(
    'joins as the avatar, idles, answers the user with its persona, is interrupted, records, and settles on release',
    { timeout: 240_000 },
    async () => {
      const transcripts = ['Hello, what is your name?', 'Tell me a long story about compilers.', 'Stop, please.'];
      h.fake.script = {
        transcribe: () => ({ text: transcripts.shift() ?? '' }),
        chat: (req) => {
          const last = messageText([...req.messages].reverse().find((m) => m.role === 'user')!);
          if (last.includes('story')) {
            return {
              text: 'Once upon a time, a programmer named Grace wrote a compiler. It read programs written in words. It turned them into machine code. Everyone said it could not be done. She did it anyway, and then she did it again, and again, for many years to come.',
            };
          }
          if (last.includes('name')) return { text: 'My name is Grace, and I love compilers.' };
          // After the measure of the story's end below (3 s), so that only the story is heard in it.
          return { text: 'Of course.', holdAfter: { chars: 0, until: new Promise((r) => setTimeout(r, 3500)) } };
        },
      };
      const call = await h.mintCall({ record: true });
      const { viewer, mic } = await h.joinAsUser(call);

      // The avatar joins and publishes 25 fps video of its size, and the body moves before anyone speaks.
      await waitFor(
        () => `the avatar video; ${worker.diagnosis()}`,
        () => (viewer.frames.length > 50 ? true : undefined),
        { timeoutMs: 60_000 },
      );
      const from = performance.now();
      await new Promise((r) => setTimeout(r, 3000));
      // Published at 25 fps (the host's own test checks that at the source); received close to it.
      expect(viewer.fps(from), worker.diagnosis()).toBeGreaterThanOrEqual(20);
      expect(viewer.frames.at(-1)).toMatchObject({ width: 512, height: 512 });
      const idle = viewer.frames.filter((f) => f.at > from);
      const moved = Math.max(...idle.map((f) => thumbDistance(f.thumb, idle[0]!.thumb)));
      expect(moved, 'idle motion (thumbnail change over 3 s)').toBeGreaterThan(0.5);
      const [session] = await h.t.services.sql`select state from live_sessions where id = ${call.session_id}`;
      expect(session!.state).toBe('active');

      // The user asks; the avatar answers, with the persona and the transcript in the LLM's request.
      const q1 = await speech('Hello, what is your name?');
      await mic.speak(q1.pcm);
      const asked = mic.spoken.at(-1)!.end;
      const replyAt = await waitFor('the spoken reply', () => avatarLoudAfter(viewer, asked), { timeoutMs: 30_000 });
      const sent = h.fake.chatRequests.at(-1)!;
      expect(messageText(sent.messages[0]!)).toContain(PERSONA);
      expect(sent.messages.map(messageText).join('\n')).toContain('Hello, what is your name?');
      await new Promise((r) => setTimeout(r, 2500));
      const speakingFrames = viewer.frames
        .filter((f) => f.at > replyAt + 200 && f.at < replyAt + 1800)
        .map((f) => f.mouthLuma);
      const idleMouth = idle.map((f) => f.mouthLuma);
      const spread = (a: number[]) => Math.max(...a) - Math.min(...a);
      expect(spread(speakingFrames), 'mouth motion while the avatar speaks, against idle').toBeGreaterThan(
        2 * Math.max(1, spread(idleMouth)),
      );

      // A long answer, interrupted by the user: the avatar's audio stops.
      await mic.speak((await speech('Tell me a long story about compilers.')).pcm);
      const storyAt = await waitFor('the story', () => avatarLoudAfter(viewer, mic.spoken.at(-1)!.end), {
        timeoutMs: 30_000,
      });
      await new Promise((r) => setTimeout(r, 2000));
      const utterances = mic.spoken.length;
      void mic.speak((await speech('Stop, please. Stop talking now.')).pcm);
      const interruptedAt = await waitFor('the interruption to start', () => mic.spoken[utterances]?.start);
      await new Promise((r) => setTimeout(r, 3000));
      const storyAudio = viewer.audio.filter((a) => a.at > storyAt && a.at < interruptedAt + 3000 && a.level > 400);
      expect(storyAudio.length, 'the story was heard before the interruption').toBeGreaterThan(50);
      const lastStoryAudio = storyAudio.at(-1)!.at;
      // The story is far longer than what played: it was cut soon after the user started talking
      // (VAD: 364 ms of voice while the avatar speaks: held, then dropped as the user's words come).
      expect(lastStoryAudio - interruptedAt, 'avatar audio after the user started to interrupt, ms').toBeLessThan(1500);

      // Released through the API: the call ends, settles once, the room closes, and the recording finishes.
      await mic.close();
      const released = await h.t.request('POST', RELEASE, { key: h.apiKey, body: { session_id: call.session_id } });
      expect(released.status).toBe(200);
      const usage = await waitFor('the settled usage', async () => {
        const u = await h.t.services.usage.get(h.tenantId, call.session_id);
        return u?.status === 'released' ? u : undefined;
      });
      expect(usage.billedCreditMicros).toBeGreaterThan(5_000_000);
      expect(usage.billedCreditMicros).toBeLessThanOrEqual(120_000_000);
      const recording = await waitFor(
        () =>
          `the recording; worker log:\n${worker
            .logs()
            .split('\n')
            .filter((l) => /record|call end|error|"level":[56]0/i.test(l))
            .slice(-30)
            .join('\n')}`,
        async () => {
          const [r] = await h.t.services.sql`select * from recordings where session_id = ${call.session_id}`;
          return r && r.status !== 'processing' ? r : undefined;
        },
        { timeoutMs: 60_000 },
      );
      expect(recording, worker.diagnosis()).toMatchObject({ status: 'ready', content_type: 'video/mp4' });
      expect(Number(recording!.duration_seconds)).toBeGreaterThan(5);
      const file = path.join(os.tmpdir(), `rec-${call.session_id}.mp4`);
      const body = await h.t.services.storage.get(recording!.storage_key as string);
      const chunks: Buffer[] = [];
      for await (const c of body) chunks.push(c as Buffer);
      writeFileSync(file, Buffer.concat(chunks));
      const probe = spawnSync(resolveFfmpegPath(), ['-v', 'error', '-i', file, '-f', 'null', '-'], {
        encoding: 'utf8',
      });
      expect(probe.status).toBe(0);
      // The user's voice is in it, mixed with the avatar's: their first question's loudness contour is
      // found there (0.98 in runs; 0.66 with the user left out).
      const decoded = spawnSync(
        resolveFfmpegPath(),
        ['-v', 'error', '-i', file, '-vn', '-ac', '1', '-ar', '16000', '-f', 's16le', '-'],
        { maxBuffer: 64 << 20 },
      );
      const recorded = new Int16Array(decoded.stdout.buffer, decoded.stdout.byteOffset, decoded.stdout.byteLength >> 1);
      expect(
        contourMatch(loudnessContour(q1.pcm, q1.sampleRate), loudnessContour(recorded, 16_000)),
        "the user's first question in the recording",
      ).toBeGreaterThan(0.8);
      await viewer.leave();
      await waitFor('the room to close', async () =>
        (await h.rooms.listRooms([call.room_name])).length === 0 ? true : undefined,
      );
      // Released with its user in the room, the call's room closed after the worker's voice and
      // avatar had left it, not under them: LiveKit's engine logged no error in the worker.
      expect(
        worker
          .logs()
          .split('\n')
          .filter((l) => / ERROR livekit/.test(l)),
      ).toEqual([]);

      // The connection history the API serves: the user's join and microphone, the avatar's join.
      const history = await json<{ data: { participantIdentity: string; kind: string }[] }>(
        await h.t.request('GET', `/api/v1/sessions/${call.session_id}/connection-history`, { key: h.apiKey }),
      );
      const seen = history.data.map((e) => `${e.participantIdentity}:${e.kind}`);
      expect(seen).toEqual(
        expect.arrayContaining([
          `${call.participant_identity}:joined`,
          `${call.participant_identity}:track_published`,
          `${call.avatar_identity}:joined`,
          `${call.participant_identity}:left`,
        ]),
      );
    },
  );

  it(
    'degrades cleanly when its LLM fails (the avatar apologises, the call goes on, settles once) and goes on serving other calls',
    { timeout: 180_000 },
    async () => {
      h.fake.script = {
        transcribe: () => ({ text: 'Are you there?' }),
        chat: () => ({ fail: { status: 500, message: 'model crashed' } }),
      };
      const call = await h.mintCall();
      const { viewer, mic } = await h.joinAsUser(call);
      await waitFor(
        () => `the avatar video; ${worker.diagnosis()}`,
        () => (viewer.frames.length > 25 ? true : undefined),
        { timeoutMs: 60_000 },
      );
      await mic.speak((await speech('Are you there?')).pcm);
      const asked = mic.spoken.at(-1)!.end;
      // The LLM fails (and its one retry): the avatar says it cannot answer, and the call goes on.
      await waitFor(
        () => `the apology; ${worker.diagnosis()}`,
        () => avatarLoudAfter(viewer, asked),
        { timeoutMs: 60_000 },
      );
      expect(h.fake.chatRequests.length).toBeGreaterThanOrEqual(2);
      const [live] = await h.t.services.sql`select state from live_sessions where id = ${call.session_id}`;
      expect(live!.state).toBe('active');
      // The user leaves: the call ends and is settled, once.
      await mic.close();
      await viewer.leave();
      const usage = await waitFor('the settled call', async () => {
        const u = await h.t.services.usage.get(h.tenantId, call.session_id);
        return u?.status === 'released' ? u : undefined;
      });
      expect(usage.billedCreditMicros).toBeGreaterThan(0);
      const [ended] = await h.t.services.sql`select end_reason from live_sessions where id = ${call.session_id}`;
      expect(ended!.end_reason).toBe('user_left');

      // The worker is still serving: a new call gets its avatar.
      h.fake.script = {};
      const next = await h.mintCall();
      const again = new Viewer(next.avatar_identity);
      await again.connect(next.server_url, next.participant_token);
      await waitFor(
        () => `the next call's avatar; ${worker.diagnosis()}`,
        () => (again.frames.length > 25 ? true : undefined),
        { timeoutMs: 60_000 },
      );
      await again.leave();
      await waitFor('the next call to end', async () => {
        const [s] = await h.t.services.sql`select state from live_sessions where id = ${next.session_id}`;
        return s?.state === 'ended' ? true : undefined;
      });
    },
  );

  it(
    'serves another agent as its avatar (provider mode): an agents-js AgentSession with our AvatarSession plugin speaks through it, is told of playback, and can interrupt it',
    { timeout: 180_000 },
    async () => {
      // The customer's room and agent: an agents-js AgentSession whose audio goes to our avatar.
      const roomName = `customer-${randomBase62(8)}`;
      await h.rooms.createRoom({ name: roomName, emptyTimeout: 120 });
      const agentRoom = new Room();
      await agentRoom.connect(url, await token(roomName, 'customer-agent', { agent: true }), {
        autoSubscribe: false,
        dynacast: false,
      });
      voice.DataStreamAudioOutput._playbackFinishedRpcRegistered = false;
      const session = new voice.AgentSession({
        tts: new EmbeddedTTS(),
        vad: null as never,
        turnHandling: { turnDetection: 'manual' as never },
      } as never);
      const avatar = new AvatarSession({
        avatarId: h.avatarId,
        client: new AvatarClient({ apiKey: h.apiKey, baseUrl: h.apiUrl }),
      });
      const grant = await avatar.start(session, agentRoom);
      expect(grant).toMatchObject({ room_name: roomName, participant_token: null });
      await session.start({
        agent: new voice.Agent({ instructions: 'x' }),
        room: agentRoom,
        inputOptions: { audioEnabled: false },
        record: false,
      });

      // A user watches: the avatar speaks for the agent, lips moving.
      const viewer = new Viewer(grant.avatar_identity);
      await viewer.join(url, roomName, 'customer-user');
      await waitFor(
        () => `the avatar video; ${worker.diagnosis()}`,
        () => (viewer.frames.length > 25 ? true : undefined),
        { timeoutMs: 60_000 },
      );
      const saidAt = performance.now();
      const said = session.say('Hello. I am the agent, and this avatar speaks for me.');
      await said.waitForPlayout();
      expect(said.interrupted).toBe(false);
      expect(viewer.audio.filter((a) => a.at > saidAt && a.level > 400).length, 'avatar audio').toBeGreaterThan(50);
      const [participant] = (await h.rooms.listParticipants(roomName)).filter(
        (p) => p.identity === grant.avatar_identity,
      );
      expect(participant?.attributes['lk.publish_on_behalf']).toBe('customer-agent');

      // The agent interrupts its own speech: the avatar stops and reports the interruption.
      const long = session.say(
        'This is a much longer sentence that the agent will interrupt before the avatar has finished saying it, which is the point of this test.',
      );
      await new Promise((r) => setTimeout(r, 1500));
      await session.interrupt();
      await long.waitForPlayout();
      expect(long.interrupted).toBe(true);

      // The plugin closes (the agent's job ends): the session is released, the avatar leaves the
      // customer's room, which stays.
      await avatar.aclose();
      await waitFor(
        'the avatar to leave',
        async () =>
          (await h.rooms.listParticipants(roomName)).some((p) => p.identity === grant.avatar_identity)
            ? undefined
            : true,
        { timeoutMs: 30_000 },
      );
      expect((await h.rooms.listRooms([roomName])).length).toBe(1);
      expect((await h.t.services.usage.get(h.tenantId, grant.session_id))?.status).toBe('released');
      await session.close();
      await viewer.leave();
      await agentRoom.disconnect();
    },
  );

  // Last: it stops the worker.
  it(
    'drains on SIGTERM: the call in progress is ended and settled, the worker exits 0 without an error, and new mints find no capacity',
    { timeout: 180_000 },
    async () => {
      const call = await h.mintCall();
      const viewer = new Viewer(call.avatar_identity);
      await viewer.connect(call.server_url, call.participant_token);
      await waitFor(
        () => `the avatar video; ${worker.diagnosis()}`,
        () => (viewer.frames.length > 25 ? true : undefined),
        { timeoutMs: 60_000 },
      );

      const logsBefore = worker.logs().length;
      expect(await worker.stop('SIGTERM')).toBe(0);
      const s = await h.t.services.liveSessions.get(call.session_id);
      expect(s).toMatchObject({ state: 'ended', endReason: 'worker_shutdown' });
      expect((await h.t.services.usage.get(h.tenantId, call.session_id))?.status).toBe('released');
      const errors = worker
        .logs()
        .slice(logsBefore)
        .split('\n')
        .filter((l) => /"level":[56]0/.test(l));
      expect(
        errors.map((l) => {
          const e = JSON.parse(l) as { msg: string; err?: { message?: string } };
          return `${e.msg}: ${e.err?.message ?? ''}`;
        }),
      ).toEqual([]);
      await viewer.leave();

      // No worker serves the pool any more: the mint says so (503), and nothing is reserved.
      const res = await h.t.request('POST', MINT, { key: h.apiKey, body: { avatar_id: h.avatarId } });
      expect(res.status).toBe(503);
      expect(await json(res)).toMatchObject({ status: 503, code: 'capacity_unavailable', retryable: true });
    },
  );
});
