import { initializeLogger } from '@livekit/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RELEASE, startAgentHarness, type AgentHarness } from '../test/agent-harness.ts';
import { waitFor } from '../test/helpers.ts';
import type { WorkerProcess } from './test-support.ts';

/**
 * A call minted as soon as a full worker's call is released: the API frees the slot at once, but
 * the worker tells LiveKit it has room only at its next load report (every 2.5 s), and LiveKit
 * drops a dispatch that finds no worker with room. The API dispatches a call no worker has taken
 * again (core/live/calls.ts): it starts within seconds, not never.
 */
initializeLogger({ pretty: false, level: 'warn' });

let h: AgentHarness;
let worker: WorkerProcess;

beforeAll(async () => {
  h = await startAgentHarness({ avatar: { displayName: 'Grace', loop: { seconds: 4, size: 256 } } });
  worker = await h.startWorker({ AGENT_SLOTS: '1' });
}, 180_000);

afterAll(async () => {
  await h?.endOpenCalls();
  await h?.close();
});

const claimed = (sessionId: string) => async () =>
  (await h.t.services.liveSessions.get(sessionId))?.workerId ? true : undefined;

describe('dispatch', () => {
  it(
    'happy: a call minted the moment a full worker frees its slot is taken by that worker within seconds',
    { timeout: 120_000 },
    async () => {
      const first = await h.mintCall();
      const { viewer } = await h.joinAsUser(first);
      await waitFor(
        () => `the first call's avatar; ${worker.diagnosis()}`,
        () => (viewer.frames.length > 10 ? true : undefined),
        {
          timeoutMs: 60_000,
        },
      );
      const released = await h.t.request('POST', RELEASE, { key: h.apiKey, body: { session_id: first.session_id } });
      expect(released.status).toBe(200);
      await viewer.leave();

      const second = await h.mintCall();
      const mintedAt = performance.now();
      await waitFor(() => `the second call taken by a worker; ${worker.diagnosis()}`, claimed(second.session_id), {
        timeoutMs: 20_000,
      });
      // Dispatched again after 4 s at most once or twice; without it the call would wait out its 60 s join timeout.
      expect(performance.now() - mintedAt).toBeLessThan(15_000);
      const { viewer: v2 } = await h.joinAsUser(second);
      await waitFor(
        () => `the second call's avatar; ${worker.diagnosis()}`,
        () => (v2.frames.length > 10 ? true : undefined),
        {
          timeoutMs: 60_000,
        },
      );
      // One avatar: a dispatch that reached the worker already running the call was refused.
      const inRoom = await h.rooms.listParticipants(second.room_name);
      expect(inRoom.filter((p) => p.identity === second.avatar_identity)).toHaveLength(1);
      await v2.leave();
    },
  );
});
