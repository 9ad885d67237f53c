import { writeFileSync } from 'node:fs';
import { initializeLogger } from '@livekit/agents';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../test/agent-harness.ts';
import { messageText, wavSeconds, type ChatRequest } from '../test/fakes/openai.ts';
import { waitFor } from '../test/helpers.ts';
import { avatarLoudAfter, speech, type WorkerProcess } from './test-support.ts';
import { PAUSE_KEPT_MS } from './voice/turns.ts';

/**
 * Turn-taking in a live call (agent/voice/turns.ts), end to end: the real worker, LiveKit server and
 * VAD, the user's recorded speech (the embedded TTS) sent from a microphone in real time, the fake
 * STT and LLM. A pause inside an utterance does not end the turn; speech over the avatar stops it.
 */
initializeLogger({ pretty: false, level: 'warn' });

const RATE = 16_000;
const FIRST = 'I would like to know';
const SECOND = 'about the weather on Mars.';
const STORY =
  'Once upon a time, a programmer named Grace wrote a compiler. It read programs written in words. It turned them into machine code. Everyone said it could not be done. She did it anyway, and then she did it again, and again, for many years to come, until every programmer in the land wrote in words.';

let h: AgentHarness;
let worker: WorkerProcess;
/** Seconds of audio of each transcription request, in order. */
const transcribed: number[] = [];
let wholeSeconds = 0;
let partsHeard = 0;
/** What the STT hears in the next utterance, whatever it is (once). */
let heardNext: string | undefined;

/** Speech without the silence the TTS puts around it (so a pause between two parts is what the test makes it). */
function trimmed(pcm: Int16Array): Int16Array {
  const loud = (i: number) => Math.abs(pcm[i]!) > 500;
  let from = 0;
  while (from < pcm.length && !loud(from)) from++;
  let to = pcm.length;
  while (to > from && !loud(to - 1)) to--;
  return pcm.slice(from, to);
}

function concat(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The user's words of the turn a chat request answers: its user messages since the last assistant message. */
function lastTurn(req: ChatRequest): string {
  const out: string[] = [];
  for (const m of [...req.messages].reverse()) {
    if (m.role === 'assistant') break;
    if (m.role === 'user') out.unshift(messageText(m));
  }
  return out.join(' ');
}

/** When the voice ended each user turn (its `user turn ended` log lines), wall clock ms. */
function turnsEnded(w: WorkerProcess): number[] {
  return w
    .logs()
    .split('\n')
    .filter((l) => l.includes('"msg":"user turn ended"'))
    .map((l) => (JSON.parse(l) as { turnEndAt: number }).turnEndAt);
}

beforeAll(async () => {
  h = await startAgentHarness({ avatar: { displayName: 'Grace', loop: { seconds: 4, size: 256 } } });
  h.fake.script = {
    transcribe: (req) => {
      const seconds = wavSeconds(req.audio);
      transcribed.push(seconds);
      if (heardNext !== undefined) {
        const text = heardNext;
        heardNext = undefined;
        return { text };
      }
      // What the STT hears depends on how much of the question it was given: all of it, or its
      // parts in turn (the VAD's cut of the first may hold more than the first part's length).
      if (wholeSeconds > 0 && seconds >= wholeSeconds - 0.15) return { text: `${FIRST} ${SECOND}` };
      if (wholeSeconds > 0) return { text: partsHeard++ === 0 ? FIRST : SECOND };
      // A backchannel's stretch: its 250 ms, the VAD's 500 ms before it and the silence after it.
      if (seconds < 1.4) return { text: 'Mm-hmm.' };
      return { text: 'Please tell me a long story.' };
    },
    chat: (req) => {
      const said = lastTurn(req);
      if (said.includes('story')) return { text: STORY };
      if (said.includes('Mars')) return { text: 'It is very cold on Mars.' };
      return { text: 'Of course.' };
    },
  };
  worker = await h.startWorker();
}, 180_000);

afterEach(() => h.endOpenCalls());

afterAll(async () => {
  if (process.env.WORKER_LOG) writeFileSync(process.env.WORKER_LOG, worker?.logs() ?? '');
  await h?.close();
});

describe('turn-taking on the real LiveKit server', () => {
  it(
    `keeps a ${PAUSE_KEPT_MS} ms pause inside an utterance in the turn, goes on through a backchannel, resumes after a noise, and stops the avatar when the user speaks over it`,
    { timeout: 240_000 },
    async () => {
      const first = trimmed((await speech(FIRST)).pcm);
      const second = trimmed((await speech(SECOND)).pcm);
      const question = concat(first, new Int16Array(Math.round((RATE * PAUSE_KEPT_MS) / 1000)), second);
      expect((await speech(FIRST)).sampleRate).toBe(RATE);
      wholeSeconds = question.length / RATE;

      const call = await h.mintCall();
      const { viewer, mic } = await h.joinAsUser(call);
      await waitFor(
        () => `the avatar video; ${worker.diagnosis()}`,
        () => (viewer.frames.length > 25 ? true : undefined),
        { timeoutMs: 60_000 },
      );
      const listening = () =>
        [...viewer.room.remoteParticipants.values()].some((p) => p.attributes['lk.agent.state'] === 'listening');
      await waitFor('the voice agent to listen', () => (listening() ? true : undefined), { timeoutMs: 60_000 });

      // 1. The question with a pause in the middle: one turn, answered once it is whole.
      const chatsBefore = h.fake.chatRequests.length;
      await mic.speak(question);
      const { start, end } = mic.spoken.at(-1)!;
      const replyAt = await waitFor(
        () => `the answer; ${worker.diagnosis()}`,
        () => avatarLoudAfter(viewer, start),
        { timeoutMs: 30_000 },
      );
      const turns = h.fake.chatRequests.slice(chatsBefore).map(lastTurn);
      const heard = `turns the LLM was asked: ${JSON.stringify(turns)}; transcriptions (s): ${transcribed.join(', ')}; question ${wholeSeconds.toFixed(2)} s`;
      expect(replyAt, `the avatar answered before the question ended; ${heard}`).toBeGreaterThan(end);
      // Nor did a turn end inside it (a reply the user's resuming stopped before it was heard included).
      const wall = (t: number) => t - performance.now() + Date.now();
      const turnEnds = turnsEnded(worker).filter((at) => at > wall(start));
      expect(
        turnEnds.filter((at) => at < wall(end)),
        `turns ended inside the question; ${heard}`,
      ).toEqual([]);
      expect(turnEnds.length, heard).toBe(1);
      // The LLM may have been asked the first half ahead of time (preemptive generation on the
      // transcript the STT's VAD cut at AGENT_STT_SILENCE_MS), its answer thrown away as the user
      // went on: the turn itself, the one answered, is the whole question, after it ended.
      expect(turns.at(-1), heard).toContain(FIRST);
      expect(turns.at(-1), heard).toContain(SECOND);
      await new Promise((r) => setTimeout(r, 3000));

      // 2. A long answer: a backchannel over it lets it go on, a noise holds it a while, the user's speech stops it (barge-in).
      wholeSeconds = 0;
      await mic.speak(trimmed((await speech('Please tell me a long story.')).pcm));
      const storyAt = await waitFor('the story', () => avatarLoudAfter(viewer, mic.spoken.at(-1)!.end), {
        timeoutMs: 30_000,
      });
      await new Promise((r) => setTimeout(r, 2500));

      // 2a. A backchannel over it (250 ms of voice): the avatar goes on, and the LLM is not asked.
      const chatsBeforeBackchannel = h.fake.chatRequests.length;
      await mic.speak(trimmed((await speech('Yeah.')).pcm).slice(0, Math.round(RATE * 0.25)));
      const backchannelAt = mic.spoken.at(-1)!.start;
      await new Promise((r) => setTimeout(r, 3500));
      // The story goes on, its sentences with their breaks (stopped, the avatar would have been
      // silent, then answered "Mm-hmm." in under a second).
      const goesOn = viewer.audio.filter((a) => a.at > backchannelAt + 500 && a.at < backchannelAt + 3500);
      const voicedMs = goesOn.filter((a) => a.level > 400).length * 10;
      expect(voicedMs, 'avatar speech 0.5 to 3.5 s after the backchannel, ms').toBeGreaterThan(1500);
      expect(h.fake.chatRequests.slice(chatsBeforeBackchannel).map(lastTurn)).toEqual([]);

      // 2b. A noise over it (600 ms of voice the STT makes no words of): the avatar holds the
      // story, then, the noise over for agents-js's false-interruption timeout, plays it on.
      heardNext = '';
      const chatsBeforeNoise = h.fake.chatRequests.length;
      await mic.speak(trimmed((await speech('Hmm, well.')).pcm).slice(0, Math.round(RATE * 0.6)));
      const noise = mic.spoken.at(-1)!;
      await new Promise((r) => setTimeout(r, 5000));
      const voiced = viewer.audio.filter((a) => a.at > noise.start && a.level > 400).map((a) => a.at);
      const breaks = voiced.map((at, i) => at - (i === 0 ? noise.start : voiced[i - 1]!));
      // Held from 300 ms of its voice until 1 s after the turn's long silence (0.7 s) after it.
      expect(Math.max(...breaks), 'the longest break in the avatar speech after the noise began, ms').toBeGreaterThan(
        1200,
      );
      expect(
        voiced.filter((at) => at > noise.end + 2500).length * 10,
        'avatar speech from 2.5 s after the noise, ms',
      ).toBeGreaterThan(1200);
      expect(h.fake.chatRequests.slice(chatsBeforeNoise).map(lastTurn)).toEqual([]);

      // 2c. Speech over it: it stops.
      const said = mic.spoken.length;
      void mic.speak(trimmed((await speech('Stop, please. Stop talking now.')).pcm));
      const interruptedAt = await waitFor('the interruption to start', () => mic.spoken[said]?.start);
      // The utterance lasts 2 s: the avatar's answer to it comes after this window.
      await new Promise((r) => setTimeout(r, 2200));
      const story = viewer.audio.filter((a) => a.at > storyAt && a.at < interruptedAt + 2200 && a.level > 400);
      const stoppedAfter = story.at(-1)!.at - interruptedAt;
      // As agent/worker.realtime.test.ts bounds it on a loaded machine (about 0.6 s on a quiet one).
      expect(stoppedAfter, 'avatar audio after the user started speaking over it, ms').toBeLessThan(1500);

      await mic.close();
      await viewer.leave();
    },
  );
});
