import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { initializeLogger, voice } from '@livekit/agents';
import { AudioSource, LocalAudioTrack, Room, TrackKind, TrackPublishOptions, TrackSource } from '@livekit/rtc-node';
import { AgentDispatchClient, RoomServiceClient } from 'livekit-server-sdk';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { LiveSessionStore } from '../core/live/sessions.ts';
import { randomBase62 } from '../core/ids.ts';
import { resolveFfmpegPath } from '../render/encode/index.ts';
import { synthesize } from '../render/tts/index.ts';
import { messageText, startFakeOpenAI, type FakeOpenAI } from '../test/fakes/openai.ts';
import { testServices, waitFor } from '../test/helpers.ts';
import { DEV_KEY, DEV_SECRET, Microphone, Viewer, startWorkerProcess, storeIdleLoop, thumbDistance, token, type WorkerProcess } from './test-support.ts';
import { EmbeddedTTS } from './voice/tts.ts';

/**
 * The agent worker end to end, as it runs in production: the real worker process, the real LiveKit
 * server, the real TTS and renderer, and a local OpenAI-compatible server standing in for the paid
 * STT and LLM. A user joins with a microphone, talks to the avatar, interrupts it, and the call is
 * released; the database then holds the settled usage, the connection history and the recording.
 */
initializeLogger({ pretty: false, level: 'warn' });
const url = inject('livekitUrl');
const http = url.replace(/^ws/, 'http');
const rooms = new RoomServiceClient(http, DEV_KEY, DEV_SECRET);
const agentName = `avatar-e2e-${process.pid}`;
const PERSONA = 'You love compilers and you answer in one short sentence.';

let fake: FakeOpenAI;
let t: Awaited<ReturnType<typeof testServices>>;
let worker: WorkerProcess;
let tenantId: string;
let avatarId: string;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  const env = { LIVEKIT_URL: url, LIVEKIT_API_KEY: DEV_KEY, LIVEKIT_API_SECRET: DEV_SECRET, OPENAI_BASE_URL: fake.baseUrl, OPENAI_API_KEY: 'test-key', AGENT_NAME: agentName };
  t = await testServices({ env });
  const tenant = await t.tenants.create('e2e');
  tenantId = tenant.id;
  await t.ledger.grant(tenantId, 3_600_000_000);
  await t.sql`update tenants set recordings_enabled = true where id = ${tenantId}`;
  avatarId = `ava_${randomBase62(20)}`;
  const loopKey = await storeIdleLoop(t.storage, `tenants/${tenantId}/avatars/${avatarId}/loops/g1/cache`, 4);
  await t.sql`
    insert into avatars (id, tenant_id, display_name, status, idle_video_status, source_kind, serving_cache_key, personality)
    values (${avatarId}, ${tenantId}, 'Grace', 'ready', 'ready', 'video', ${loopKey}, ${PERSONA})`;
  worker = await startWorkerProcess({
    ...env,
    DATABASE_URL: t.dbUrl,
    DATA_DIR: t.config.dataDir,
    LOG_LEVEL: 'info',
    STT_MODEL: 'fake-stt',
    LLM_MODEL: 'fake-llm',
    USER_JOIN_TIMEOUT_SECONDS: '60',
    AGENT_DRAIN_SECONDS: '5',
  });
}, 180_000);

// A failed test leaves its call open: end it, so the next test starts clean.
afterEach(async () => {
  const open = await t.sql<{ id: string; room_name: string }[]>`select id, room_name from live_sessions where state <> 'ended'`;
  for (const s of open) {
    await new LiveSessionStore(t.sql, t.usage).end(s.id, 'manual');
    await rooms.deleteRoom(s.room_name).catch(() => {});
  }
});

afterAll(async () => {
  if (process.env.WORKER_LOG) (await import('node:fs')).writeFileSync(process.env.WORKER_LOG, worker?.logs() ?? '');
  await worker?.stop();
  await fake?.close();
  await t?.close();
});

/** What the session mint does, minus the HTTP: a reserved usage row, the session row, the room, the dispatch. */
async function seedCall(opts: { record?: boolean; maxDurationSeconds?: number } = {}) {
  const { sessionId } = await t.usage.open({ tenantId, apiKeyId: null, kind: 'live', avatarId, reserveCreditMicros: 120_000_000, ttlSeconds: 3600 });
  const room = `avatar-${sessionId}`;
  await t.sql`
    insert into live_sessions (id, tenant_id, avatar_id, capacity_pool, mode, room_name, user_identity, avatar_identity, agent_identity, record, max_duration_seconds, state)
    values (${sessionId}, ${tenantId}, ${avatarId}, 'primary', 'conversation', ${room}, ${`user-${sessionId}`}, ${`avatar-${sessionId}`}, ${`agent-${sessionId}`},
            ${opts.record ?? false}, ${opts.maxDurationSeconds ?? 300}, 'pending')`;
  await rooms.createRoom({ name: room, emptyTimeout: 120 });
  await new AgentDispatchClient(http, DEV_KEY, DEV_SECRET).createDispatch(room, agentName, { metadata: JSON.stringify({ session_id: sessionId }) });
  return { sessionId, room, user: `user-${sessionId}`, avatar: `avatar-${sessionId}` };
}

async function speech(text: string): Promise<{ pcm: Int16Array; sampleRate: number; seconds: number }> {
  const s = await synthesize({ text, voice: 'rms' });
  return { pcm: s.samples, sampleRate: s.sampleRate, seconds: s.durationSeconds };
}

const avatarLoudAfter = (viewer: Viewer, after: number) => viewer.audio.find((a) => a.at > after && a.level > 400)?.at;

describe('the agent worker on the real LiveKit server', () => {
  it('joins as the avatar, idles, answers the user with its persona, is interrupted, records, and settles on release', { timeout: 240_000 }, async () => {
    const transcripts = ['Hello, what is your name?', 'Tell me a long story about compilers.', 'Stop, please.'];
    fake.script = {
      transcribe: () => ({ text: transcripts.shift() ?? '' }),
      chat: (req) => {
        const last = messageText([...req.messages].reverse().find((m) => m.role === 'user')!);
        if (last.includes('story')) {
          return { text: 'Once upon a time, a programmer named Grace wrote a compiler. It read programs written in words. It turned them into machine code. Everyone said it could not be done. She did it anyway, and then she did it again, and again, for many years to come.' };
        }
        if (last.includes('name')) return { text: 'My name is Grace, and I love compilers.' };
        return { text: 'Of course.' };
      },
    };
    const call = await seedCall({ record: true });
    const viewer = new Viewer(call.avatar);
    await viewer.join(url, call.room, call.user);
    const micSource = new AudioSource(16_000, 1, 100);
    await viewer.room.localParticipant!.publishTrack(LocalAudioTrack.createAudioTrack('mic', micSource), new TrackPublishOptions({ source: TrackSource.SOURCE_MICROPHONE }));
    const mic = new Microphone(micSource, 16_000);

    // The avatar joins and publishes 25 fps video of its size, and the body moves before anyone speaks.
    await waitFor('the avatar video', () => (viewer.frames.length > 50 ? true : undefined), { timeoutMs: 60_000 });
    const from = performance.now();
    await new Promise((r) => setTimeout(r, 3000));
    // Published at 25 fps (the host's own test checks that at the source); received close to it.
    expect(viewer.fps(from), worker.logs().slice(-3000)).toBeGreaterThanOrEqual(20);
    expect(viewer.frames.at(-1)).toMatchObject({ width: 512, height: 512 });
    const idle = viewer.frames.filter((f) => f.at > from);
    const moved = Math.max(...idle.map((f) => thumbDistance(f.thumb, idle[0]!.thumb)));
    expect(moved, 'idle motion (thumbnail change over 3 s)').toBeGreaterThan(0.5);
    const [session] = await t.sql`select state from live_sessions where id = ${call.sessionId}`;
    expect(session!.state).toBe('active');

    // The user asks; the avatar answers, with the persona and the transcript in the LLM's request.
    const q1 = await speech('Hello, what is your name?');
    await mic.speak(q1.pcm);
    const asked = mic.spoken.at(-1)!.end;
    const replyAt = await waitFor('the spoken reply', () => avatarLoudAfter(viewer, asked), { timeoutMs: 30_000 });
    const sent = fake.chatRequests[0]!;
    expect(messageText(sent.messages[0]!)).toContain(PERSONA);
    expect(sent.messages.map(messageText).join('\n')).toContain('Hello, what is your name?');
    await new Promise((r) => setTimeout(r, 2500));
    const speakingFrames = viewer.frames.filter((f) => f.at > replyAt + 200 && f.at < replyAt + 1800).map((f) => f.mouthLuma);
    const idleMouth = idle.map((f) => f.mouthLuma);
    const spread = (a: number[]) => Math.max(...a) - Math.min(...a);
    expect(spread(speakingFrames), 'mouth motion while the avatar speaks, against idle').toBeGreaterThan(2 * Math.max(1, spread(idleMouth)));

    // A long answer, interrupted by the user: the avatar's audio stops.
    await mic.speak((await speech('Tell me a long story about compilers.')).pcm);
    const storyAt = await waitFor('the story', () => avatarLoudAfter(viewer, mic.spoken.at(-1)!.end), { timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 2000));
    const utterances = mic.spoken.length;
    void mic.speak((await speech('Stop, please. Stop talking now.')).pcm);
    const interruptedAt = await waitFor('the interruption to start', () => mic.spoken[utterances]?.start);
    await new Promise((r) => setTimeout(r, 3000));
    const storyAudio = viewer.audio.filter((a) => a.at > storyAt && a.at < interruptedAt + 3000 && a.level > 400);
    expect(storyAudio.length, 'the story was heard before the interruption').toBeGreaterThan(50);
    const lastStoryAudio = storyAudio.at(-1)!.at;
    // The story is far longer than what played: it was cut soon after the user started talking
    // (VAD, the agent's minimum interruption of 0.4 s, then clear_buffer).
    expect(lastStoryAudio - interruptedAt, 'avatar audio after the user started to interrupt, ms').toBeLessThan(1500);
    const [item] = (await t.sql`select count(*)::int as n from connection_events where session_id = ${call.sessionId}`) as { n: number }[];
    expect(item!.n).toBeGreaterThanOrEqual(2);

    // Released (as the API's release does): the call ends, settles once, and the recording finishes.
    await mic.close();
    await new LiveSessionStore(t.sql, t.usage).end(call.sessionId, 'manual');
    await rooms.deleteRoom(call.room).catch(() => {});
    const usage = await waitFor('the settled usage', async () => {
      const u = await t.usage.get(tenantId, call.sessionId);
      return u?.status === 'released' ? u : undefined;
    });
    expect(usage.billedCreditMicros).toBeGreaterThan(5_000_000);
    expect(usage.billedCreditMicros).toBeLessThanOrEqual(120_000_000);
    const recording = await waitFor(
      () => `the recording; worker log:\n${worker.logs().split('\n').filter((l) => /record|call end|error|"level":[56]0/i.test(l)).slice(-30).join('\n')}`,
      async () => {
        const [r] = await t.sql`select * from recordings where session_id = ${call.sessionId}`;
        return r && r.status !== 'processing' ? r : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(recording, worker.logs().slice(-3000)).toMatchObject({ status: 'ready', content_type: 'video/mp4' });
    expect(Number(recording!.duration_seconds)).toBeGreaterThan(5);
    const file = path.join(os.tmpdir(), `rec-${call.sessionId}.mp4`);
    const body = await t.storage.get(recording!.storage_key as string);
    const chunks: Buffer[] = [];
    for await (const c of body) chunks.push(c as Buffer);
    writeFileSync(file, Buffer.concat(chunks));
    const probe = spawnSync(resolveFfmpegPath(), ['-v', 'error', '-i', file, '-f', 'null', '-'], { encoding: 'utf8' });
    expect(probe.status).toBe(0);
    await viewer.leave();
  });

  it('degrades cleanly when its LLM fails (the avatar apologises, the call goes on, settles once) and goes on serving other calls', { timeout: 180_000 }, async () => {
    fake.script = { transcribe: () => ({ text: 'Are you there?' }), chat: () => ({ fail: { status: 500, message: 'model crashed' } }) };
    const call = await seedCall();
    const viewer = new Viewer(call.avatar);
    await viewer.join(url, call.room, call.user);
    const micSource = new AudioSource(16_000, 1, 100);
    await viewer.room.localParticipant!.publishTrack(LocalAudioTrack.createAudioTrack('mic', micSource), new TrackPublishOptions({ source: TrackSource.SOURCE_MICROPHONE }));
    const mic = new Microphone(micSource, 16_000);
    await waitFor('the avatar video', () => (viewer.frames.length > 25 ? true : undefined), { timeoutMs: 60_000 });
    await mic.speak((await speech('Are you there?')).pcm);
    const asked = mic.spoken.at(-1)!.end;
    // The LLM fails (and its one retry): the avatar says it cannot answer, and the call goes on.
    await waitFor(() => `the apology; worker log:\n${worker.logs().slice(-3000)}`, () => avatarLoudAfter(viewer, asked), { timeoutMs: 60_000 });
    expect(fake.chatRequests.length).toBeGreaterThanOrEqual(2);
    const [live] = await t.sql`select state from live_sessions where id = ${call.sessionId}`;
    expect(live!.state).toBe('active');
    // The user leaves: the call ends and is settled, once.
    await mic.close();
    await viewer.leave();
    const usage = await waitFor('the settled call', async () => {
      const u = await t.usage.get(tenantId, call.sessionId);
      return u?.status === 'released' ? u : undefined;
    });
    expect(usage.billedCreditMicros).toBeGreaterThan(0);
    const [ended] = await t.sql`select end_reason from live_sessions where id = ${call.sessionId}`;
    expect(ended!.end_reason).toBe('user_left');

    // The worker is still serving: a new call gets its avatar.
    fake.script = {};
    const next = await seedCall();
    const again = new Viewer(next.avatar);
    await again.join(url, next.room, next.user);
    await waitFor('the next call\'s avatar', () => (again.frames.length > 25 ? true : undefined), { timeoutMs: 60_000 });
    await again.leave();
    await waitFor('the next call to end', async () => {
      const [s] = await t.sql`select state from live_sessions where id = ${next.sessionId}`;
      return s?.state === 'ended' ? true : undefined;
    });
  });

  it('drains on SIGTERM: the call in progress is ended and settled, and the worker exits 0 without an error', { timeout: 180_000 }, async () => {
    const second = await startWorkerProcess({
      LIVEKIT_URL: url,
      LIVEKIT_API_KEY: DEV_KEY,
      LIVEKIT_API_SECRET: DEV_SECRET,
      OPENAI_BASE_URL: fake.baseUrl,
      OPENAI_API_KEY: 'test-key',
      AGENT_NAME: `${agentName}-drain`,
      DATABASE_URL: t.dbUrl,
      DATA_DIR: t.config.dataDir,
      LOG_LEVEL: 'info',
      AGENT_DRAIN_SECONDS: '2',
    });
    const { sessionId } = await t.usage.open({ tenantId, apiKeyId: null, kind: 'live', avatarId, reserveCreditMicros: 60_000_000, ttlSeconds: 3600 });
    const room = `avatar-${sessionId}`;
    await t.sql`
      insert into live_sessions (id, tenant_id, avatar_id, capacity_pool, mode, room_name, user_identity, avatar_identity, agent_identity, record, max_duration_seconds, state)
      values (${sessionId}, ${tenantId}, ${avatarId}, 'primary', 'conversation', ${room}, ${`user-${sessionId}`}, ${`avatar-${sessionId}`}, ${`agent-${sessionId}`}, false, 60, 'pending')`;
    await rooms.createRoom({ name: room, emptyTimeout: 60 });
    await new AgentDispatchClient(http, DEV_KEY, DEV_SECRET).createDispatch(room, `${agentName}-drain`, { metadata: JSON.stringify({ session_id: sessionId }) });
    const viewer = new Viewer(`avatar-${sessionId}`);
    await viewer.join(url, room, `user-${sessionId}`);
    await waitFor('the avatar video', () => (viewer.frames.length > 25 ? true : undefined), { timeoutMs: 60_000 });

    expect(await second.stop('SIGTERM')).toBe(0);
    const [s] = await t.sql`select state, end_reason from live_sessions where id = ${sessionId}`;
    expect(s).toMatchObject({ state: 'ended', end_reason: 'worker_shutdown' });
    expect((await t.usage.get(tenantId, sessionId))?.status).toBe('released');
    const errors = second.logs().split('\n').filter((l) => /"level":[56]0/.test(l));
    expect(errors.map((l) => { const e = JSON.parse(l) as { msg: string; err?: { message?: string } }; return `${e.msg}: ${e.err?.message ?? ""}`; })).toEqual([]);
    await viewer.leave();
  });

  it('serves another agent as its avatar (provider mode): an agents-js AgentSession speaks through it, is told of playback, and can interrupt it', { timeout: 180_000 }, async () => {
    // The customer's room and agent: an agents-js AgentSession whose audio goes to our avatar.
    const roomName = `customer-${randomBase62(8)}`;
    await rooms.createRoom({ name: roomName, emptyTimeout: 120 });
    const agentRoom = new Room();
    await agentRoom.connect(url, await token(roomName, 'customer-agent', { agent: true }), { autoSubscribe: false, dynacast: false });
    const { sessionId } = await t.usage.open({ tenantId, apiKeyId: null, kind: 'live', avatarId, reserveCreditMicros: 120_000_000, ttlSeconds: 3600 });
    await t.sql`
      insert into live_sessions (id, tenant_id, avatar_id, capacity_pool, mode, room_name, user_identity, avatar_identity, agent_identity, record, max_duration_seconds, state)
      values (${sessionId}, ${tenantId}, ${avatarId}, 'primary', 'provider', ${roomName}, null, ${`avatar-${sessionId}`}, 'customer-agent', false, 120, 'pending')`;
    await new AgentDispatchClient(http, DEV_KEY, DEV_SECRET).createDispatch(roomName, agentName, { metadata: JSON.stringify({ session_id: sessionId }) });
    voice.DataStreamAudioOutput._playbackFinishedRpcRegistered = false;
    const session = new voice.AgentSession({ tts: new EmbeddedTTS(), vad: null as never, turnHandling: { turnDetection: 'manual' as never } } as never);
    session.output.audio = new voice.DataStreamAudioOutput({ room: agentRoom, destinationIdentity: `avatar-${sessionId}`, waitRemoteTrack: TrackKind.KIND_VIDEO });
    await session.start({ agent: new voice.Agent({ instructions: 'x' }), room: agentRoom, inputOptions: { audioEnabled: false }, record: false });

    // A user watches: the avatar speaks for the agent, lips moving.
    const viewer = new Viewer(`avatar-${sessionId}`);
    await viewer.join(url, roomName, 'customer-user');
    await waitFor('the avatar video', () => (viewer.frames.length > 25 ? true : undefined), { timeoutMs: 60_000 });
    const saidAt = performance.now();
    const said = session.say('Hello. I am the agent, and this avatar speaks for me.');
    await said.waitForPlayout();
    expect(said.interrupted).toBe(false);
    expect(viewer.audio.filter((a) => a.at > saidAt && a.level > 400).length, 'avatar audio').toBeGreaterThan(50);
    const [participant] = (await rooms.listParticipants(roomName)).filter((p) => p.identity === `avatar-${sessionId}`);
    expect(participant?.attributes['lk.publish_on_behalf']).toBe('customer-agent');

    // The agent interrupts its own speech: the avatar stops and reports the interruption.
    const long = session.say('This is a much longer sentence that the agent will interrupt before the avatar has finished saying it, which is the point of this test.');
    await new Promise((r) => setTimeout(r, 1500));
    await session.interrupt();
    await long.waitForPlayout();
    expect(long.interrupted).toBe(true);

    // The session ends (released): the avatar leaves the customer's room, which stays.
    await new LiveSessionStore(t.sql, t.usage).end(sessionId, 'manual');
    await waitFor('the avatar to leave', async () => ((await rooms.listParticipants(roomName)).some((p) => p.identity === `avatar-${sessionId}`) ? undefined : true), { timeoutMs: 30_000 });
    expect((await rooms.listRooms([roomName])).length).toBe(1);
    expect((await t.usage.get(tenantId, sessionId))?.status).toBe('released');
    await session.close();
    await viewer.leave();
    await agentRoom.disconnect();
  });
});
