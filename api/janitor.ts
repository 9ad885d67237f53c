import type { Services } from '../core/wiring/services.ts';

/** How often expired credit reservations are settled: the bound on how long a crashed holder's credits stay held. */
const JANITOR_INTERVAL_MS = 15_000;

/**
 * Ends abandoned live calls (worker lost, never joined, past their maximum duration) and frees
 * capacity slots whose call is over; settles reservations whose holder died (at the usage it last
 * reported), closes their sessions, and drops stale idempotency answers and expired dashboard
 * sign-in links and sessions, and expired join tokens of live calls. Safe to run in every
 * process at once: each step locks rows, and a call ends exactly once.
 */
export async function runJanitorOnce(
  services: Services,
): Promise<{ expired: number; liveEnded: number; slotsFreed: number }> {
  const live = await services.liveCalls.sweep();
  const expired = await services.ledger.expireDue();
  await services.usage.closeOrphaned();
  await services.idempotency.purgeExpired();
  await services.dashboard.purgeExpired();
  await services.liveCalls.purgeExpiredJoinTokens();
  return {
    expired: expired.length,
    liveEnded: live.overdue.length + live.lost.length + live.unjoined.length,
    slotsFreed: live.slotsFreed,
  };
}

export function startJanitor(services: Services, intervalMs = JANITOR_INTERVAL_MS): { stop(): Promise<void> } {
  let pass: Promise<void> | undefined;
  const timer = setInterval(() => {
    // One pass at a time: a slow pass is not stacked on.
    pass ??= runJanitorOnce(services)
      .then(
        () => undefined,
        (err: unknown) => services.log.error({ err }, 'janitor pass failed'),
      )
      .finally(() => (pass = undefined));
  }, intervalMs);
  timer.unref();
  return {
    /** No further passes; resolves once the running one (if any) is done, so the database can close after it. */
    stop: async () => {
      clearInterval(timer);
      await pass;
    },
  };
}
