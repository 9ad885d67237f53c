import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../test/agent-harness.ts';
import { freePort } from '../test/deps.ts';
import { waitFor } from '../test/helpers.ts';
import { avatarLoudAfter, speech, type WorkerProcess } from './test-support.ts';

/**
 * What an operator reads in a worker's terminal after a call that went well, at the default log
 * level (info): no error, no debug lines, nothing of what the user said or the avatar answered
 * unless LOG_TRANSCRIPTS is on, and one line per step of the call.
 */
const ASKED = 'Tell me about the zebras of Kilimanjaro.';
const ANSWER = 'Zebras graze under Kilimanjaro in the morning light.';

/**
 * The native lines a call that went well may write (docs/agent.md, "What the worker's terminal
 * shows"): OpenH264's note at a call's first frame, and a warning of LiveKit's Rust SDK as the
 * call's room is closed (the avatar deletes it as it leaves). None at error level: the avatar
 * leaving with its tracks still published made the engine log one at every call's end.
 */
const KNOWN_NATIVE_LINES = [
  /^\[OpenH264\] this = 0x\w+, Warning:Actual input framerate [\d.]+ is different from framerate in setting/,
  /^\[\S+ WARN {2}livekit_api::signal_client\] dropping pass-through signal — (no stream available|send failed)$/,
];

let h: AgentHarness;
let worker: WorkerProcess | undefined;

beforeAll(async () => {
  h = await startAgentHarness({
    avatar: { displayName: 'Ada', loop: { seconds: 2, size: 256 } },
    // A call's room closes 15 s after the mint if its user never comes (its empty timeout).
    env: { LIVE_JOIN_TIMEOUT_SECONDS: '15' },
  });
  h.fake.script = { transcribe: () => ({ text: ASKED }), chat: () => ({ text: ANSWER }) };
}, 180_000);

afterAll(async () => {
  if (process.env.WORKER_LOG) writeFileSync(process.env.WORKER_LOG, worker?.logs() ?? '');
  await h?.close();
});

/** One call: the user joins, asks, hears the answer, and leaves; settled once. */
async function oneCall(worker: WorkerProcess): Promise<void> {
  const call = await h.mintCall({ max_duration_seconds: 180 });
  const { viewer, mic } = await h.joinAsUser(call);
  await waitFor(
    () => `the avatar's first frame; ${worker.diagnosis()}`,
    () => (viewer.frames.length > 0 ? true : undefined),
  );
  // The voice agent listens once its session has started (its job process joins after the avatar).
  await waitFor(
    () => `the voice session; ${worker.diagnosis()}`,
    () => (worker.logs().includes('"msg":"voice session started"') ? true : undefined),
    { timeoutMs: 60_000 },
  );
  await mic.speak((await speech('Tell me about zebras.')).pcm);
  const asked = performance.now();
  await waitFor(
    () => `the question sent to the LLM; ${worker.diagnosis()}`,
    () => (h.fake.chatRequests.length > 0 ? true : undefined),
    // Generous: on a machine short of CPU the VAD runs behind the audio (it warns so), and the turn ends late.
    { timeoutMs: 120_000 },
  );
  await waitFor(
    () => `the answer; ${worker.diagnosis()}`,
    () => avatarLoudAfter(viewer, asked),
    { timeoutMs: 120_000 },
  );
  // The answer heard to its end (about 3 s), then the user leaves as a browser hangs up: its
  // microphone still published.
  await new Promise((r) => setTimeout(r, 4_000));
  await viewer.leave();
  await mic.close();
  await h.settledOnce(call.session_id);
  // The call's last lines (the avatar leaving its room) come after the settlement.
  await waitFor('the call ended in the worker', () =>
    worker.logs().includes('"msg":"call ended"') ? true : undefined,
  );
  await new Promise((r) => setTimeout(r, 2_000));
}

describe("the worker's output for a call that went well", () => {
  it(
    'has no error records, no debug lines, no internals of agents-js, no words of the user or the avatar, and one line per step of the call; its health endpoint and metrics answer on their ports',
    { timeout: 420_000 },
    async () => {
      const ports = { metrics: await freePort(), health: await freePort() };
      worker = await h.startWorker({
        AGENT_METRICS_PORT: String(ports.metrics),
        AGENT_HEALTH_PORT: String(ports.health),
      });
      await oneCall(worker);
      const out = worker.logs();

      // Its health endpoint (agents-js's) and its metrics, each on the port it was given.
      const health = await fetch(`http://127.0.0.1:${ports.health}/`);
      expect([health.status, await health.text()]).toEqual([200, 'OK']);
      const metrics = await (await fetch(`http://127.0.0.1:${ports.metrics}/metrics`)).text();
      const value = (series: string) =>
        Number(
          metrics
            .split('\n')
            .find((l) => l.startsWith(`${series} `))
            ?.slice(series.length + 1),
        );
      // A call of more than 5 s at 25 frames per second; a few skipped at most on a busy machine.
      expect(value('avatar_frames_published_total')).toBeGreaterThan(125);
      expect(value('avatar_frames_late_total')).toBeLessThan(value('avatar_frames_published_total') / 2);
      expect(value('avatar_render_lag_seconds_count')).toBeGreaterThan(100);
      expect(value('avatar_worker_calls{pool="primary"}')).toBe(0);
      expect(metrics).not.toContain(h.env.LIVEKIT_API_SECRET!);
      const lines = out.split('\n').filter((l) => l.trim() !== '');
      const records = lines.flatMap((l) => {
        try {
          return [JSON.parse(l) as { level: number; msg: string; hostname?: string }];
        } catch {
          return [];
        }
      });
      const raw = lines.filter((l) => !l.startsWith('{'));
      expect(
        records.filter((r) => r.level >= 50).map((r) => r.msg),
        'error records',
      ).toEqual([]);
      expect(records.filter((r) => r.level < 30).length, 'debug records at LOG_LEVEL=info').toBe(0);
      // What native code writes to stderr itself (no level of ours applies): only the two lines
      // docs/agent.md explains ("What the worker's terminal shows").
      expect(
        raw.filter((l) => !KNOWN_NATIVE_LINES.some((k) => k.test(l))),
        'native lines',
      ).toEqual([]);
      // agents-js's own workings stay below its warnings (at info it logs from warn up).
      // (Its lines carry `hostname`, which ours do not.)
      expect(records.filter((r) => r.level === 30 && r.hostname !== undefined).map((r) => r.msg)).toEqual([]);
      expect(out, 'what the user said').not.toMatch(/zebras of Kilimanjaro/i);
      expect(out, 'what the avatar answered').not.toMatch(/graze under Kilimanjaro/i);
      for (const step of ['avatar joined the call', 'voice session started', 'call ending', 'call ended'])
        expect(records.filter((r) => r.msg === step).length, `lines "${step}"`).toBe(1);
    },
  );

  it(
    'ends a call whose user never comes before LiveKit closes its empty room: unbilled, and nothing at error level',
    { timeout: 120_000 },
    async () => {
      worker ??= await h.startWorker();
      const from = worker.logs().length;
      const call = await h.mintCall({ max_duration_seconds: 60 });
      const { session, usage } = await h.settledOnce(call.session_id);
      // Ended by the avatar (5 s before the room's 15 s), not by LiveKit closing the room under it.
      expect(session.endReason).toBe('user_never_joined');
      expect(usage.billedCreditMicros).toBe(0);
      await waitFor('the call ended in the worker', () =>
        worker!.logs().slice(from).includes('"msg":"call ended"') ? true : undefined,
      );
      await new Promise((r) => setTimeout(r, 2_000));
      const lines = worker!
        .logs()
        .slice(from)
        .split('\n')
        .filter((l) => / ERROR |"level":[56]0/.test(l));
      expect(lines).toEqual([]);
    },
  );
});
