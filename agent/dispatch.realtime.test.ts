import { initializeLogger } from '@livekit/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../test/agent-harness.ts';
import { waitFor } from '../test/helpers.ts';
import type { WorkerProcess } from './test-support.ts';

/**
 * LiveKit drops a dispatch that finds no worker with room, and does not try again: a call minted in
 * the seconds after a full worker's call ended (the API frees the slot at once, the worker tells
 * LiveKit it has room at its next load report), or while the pool's workers restart. The API
 * dispatches a call no worker has taken again (core/live/calls.ts): here the call is minted before
 * any worker is registered with LiveKit, and starts once one is.
 */
initializeLogger({ pretty: false, level: 'warn' });

let h: AgentHarness;

beforeAll(async () => {
  h = await startAgentHarness({ avatar: { displayName: 'Grace', loop: { seconds: 4, size: 256 } } });
}, 180_000);

afterAll(async () => {
  await h?.endOpenCalls();
  await h?.close();
});

const claimed = (sessionId: string) => async () =>
  (await h.t.services.liveSessions.get(sessionId))?.workerId ? true : undefined;

describe('dispatch', () => {
  it(
    'happy: a call whose dispatch found no worker is taken once a worker is there, by one avatar',
    { timeout: 180_000 },
    async () => {
      // A slot declared (a worker that is restarting), no worker registered with LiveKit: the dispatch is dropped.
      await h.t.services.capacity.setPoolSlots('primary', 1);
      const call = await h.mintCall();
      await new Promise((r) => setTimeout(r, 1000));
      const worker: WorkerProcess = await h.startWorker({ AGENT_SLOTS: '1' });
      const registeredAt = performance.now();
      await waitFor(() => `the call taken by the worker; ${worker.diagnosis()}`, claimed(call.session_id), {
        timeoutMs: 30_000,
      });
      // Dispatched again every 4 s; without it the call would wait out its join timeout and fail.
      expect(performance.now() - registeredAt).toBeLessThan(15_000);
      const { viewer } = await h.joinAsUser(call);
      await waitFor(
        () => `the call's avatar; ${worker.diagnosis()}`,
        () => (viewer.frames.length > 10 ? true : undefined),
        { timeoutMs: 60_000 },
      );
      // One avatar: a dispatch that reached the worker already running the call was refused.
      await new Promise((r) => setTimeout(r, 5000));
      const inRoom = await h.rooms.listParticipants(call.room_name);
      expect(inRoom.filter((p) => p.identity === call.avatar_identity)).toHaveLength(1);
      await viewer.leave();
    },
  );
});
