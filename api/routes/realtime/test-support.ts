/** What the live-call tests share: ready avatars and scenes as rows, and the state a refused request must not touch. */
import type { z } from '@hono/zod-openapi';
import { expect } from 'vitest';
import { newId } from '../../../core/platform/ids.ts';
import type { TestApi } from '../../../test/helpers.ts';
import { readyAvatar as storedAvatar, type ReadyAvatarOptions } from '../../../test/realtime.ts';
import type { GrantSchema, QueueTicketSchema } from './livekit-schemas.ts';

export const MINT = '/api/v1/realtime/livekit/session';
export const RELEASE = '/api/v1/realtime/livekit/session/release';
export const CAPACITY = '/api/v1/realtime/livekit/capacity';

/** The wire bodies the tests read, as the route schemas type them. */
export type GrantBody = z.infer<typeof GrantSchema>;
export type QueueBody = z.infer<typeof QueueTicketSchema>;

/**
 * An avatar as a finished generation leaves it (status ready, a serving loop), as rows only: a call
 * never reads the loop's frames on the API side. `pendingIdleClip` declares an idle pool whose only
 * positive member is a clip still rendering (the source loop weighted 0).
 */
export async function readyAvatar(
  t: TestApi,
  tenantId: string,
  o: { status?: string; pendingIdleClip?: boolean; deleted?: boolean } = {},
): Promise<string> {
  const { avatarId } = await storedAvatar(t, tenantId, {
    missingCache: true,
    ...(o.status && o.status !== 'ready' ? { status: o.status as ReadyAvatarOptions['status'] } : {}),
    ...(o.pendingIdleClip ? { behavior: { idle: { clips: ['sway'], weights: { source: 0, sway: 1 } } } } : {}),
    ...(o.deleted ? { deleted: true } : {}),
  });
  if (o.pendingIdleClip) {
    await t.services
      .sql`insert into avatar_clips (avatar_id, clip_id, status, source_kind, motion_prompt) values (${avatarId}, 'sway', 'rendering', 'generated', 'sway gently')`;
  }
  return avatarId;
}

/** A scene of the workspace as its build leaves it; answers its video_cache_id. */
export async function scene(
  t: TestApi,
  tenantId: string,
  o: { status?: 'building' | 'ready' | 'failed'; expired?: boolean } = {},
): Promise<string> {
  const id = newId('scene');
  const videoCacheId = newId('videoCache');
  const status = o.status ?? 'ready';
  await t.services.sql`
    insert into scenes (tenant_id, id, status, error, profile, source_url, video_cache_id, cache_key, frame_count, fps, width, height, duration_seconds, ready_at, expires_at)
    values (${tenantId}, ${id}, ${status}, ${status === 'failed' ? 'build_failed' : null}, 'scene-v0', 'https://example.com/clip.mp4', ${videoCacheId},
            ${status === 'ready' ? `tenants/${tenantId}/scenes/${id}/cache` : null}, 50, 25, 512, 512, 2,
            ${status === 'ready' ? new Date() : null}, ${o.expired ? new Date(Date.now() - 1000) : new Date(Date.now() + 86_400_000)})`;
  return videoCacheId;
}

/** Sets the operator's slot count of a pool. */
export const setSlots = (t: TestApi, pool: string, slots: number) => t.services.capacity.setPoolSlots(pool, slots);

/** What a refused request must leave as it was: the wallet, the tenant's calls and usage rows, the pool's slots and queue. */
export async function footprint(t: TestApi, tenantId: string, pool = 'primary') {
  const [b, rows, usage, cap] = await Promise.all([
    t.services.ledger.balance(tenantId),
    t.services.sql<
      { id: string; state: string }[]
    >`select id, state from live_sessions where tenant_id = ${tenantId} order by id`,
    t.services.sql<
      { id: string; status: string }[]
    >`select id, status from session_usage where tenant_id = ${tenantId} order by id`,
    t.services.capacity.snapshot(pool),
  ]);
  return {
    balance: b.balanceCreditMicros,
    reserved: b.reservedCreditMicros,
    sessions: rows.map((r) => `${r.id}:${r.state}`),
    usage: usage.map((r) => `${r.id}:${r.status}`),
    inUse: cap.inUse,
    queued: cap.queueSize,
  };
}

/** Runs `refused` and checks it changed nothing of `footprint`. */
export async function changesNothing(t: TestApi, tenantId: string, refused: () => Promise<unknown>): Promise<void> {
  const before = await footprint(t, tenantId);
  await refused();
  expect(await footprint(t, tenantId)).toEqual(before);
}
