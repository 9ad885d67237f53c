/**
 * A step of ending a call, or of cleaning up after a failed join, that must not hold the call up:
 * one that hangs (a native call, the database) must not keep the call's slot, nor a draining
 * worker, forever. What a bounded step left undone, the API's janitor settles.
 */
import type { Logger } from '../../core/platform/log.ts';
import { orAfter } from '../../core/platform/time.ts';

/** How long a step may take before the call goes on without it. */
const STEP_MS = 5000;

/** Runs `run` (its failure ignored); after STEP_MS the call goes on without it. */
export async function boundedStep(log: Logger, step: string, run: () => Promise<unknown> | undefined): Promise<void> {
  const outcome = await orAfter(
    Promise.resolve(run()).catch(() => {}),
    STEP_MS,
    'late' as const,
  );
  if (outcome === 'late') log.warn({ step, ms: STEP_MS }, 'a step did not finish in time; going on');
}
