import type { Sql, Tx } from '../platform/db/index.ts';

/** At most this many of each are named in an answer: enough to act on, bounded whatever the workspace holds. */
const USERS_NAMED_MAX = 100;

/** What still uses an asset, so deleting it would break them. */
export interface AssetUsers {
  /** Live avatars whose portrait (sourceAssetId, the clip library's defaultSourceAssetId) it is. */
  avatarIds: string[];
  /** Live clips of live avatars whose uploaded source (uploadAssetId) it is. */
  clips: { avatarId: string; clipId: string }[];
}

/**
 * Who uses the tenant's asset `assetId` now. Deleted avatars and retired clips do not count: no
 * job or read of theirs touches the asset again. The source reviews of a portrait swap name the
 * asset too, but as an audit record only.
 */
export async function assetUsers(q: Sql | Tx, tenantId: string, assetId: string): Promise<AssetUsers> {
  const avatars = await q<{ id: string }[]>`
    select id from avatars
    where source_asset_id = ${assetId} and tenant_id = ${tenantId} and deleted_at is null
    order by id limit ${USERS_NAMED_MAX}`;
  const clips = await q<{ avatar_id: string; clip_id: string }[]>`
    select c.avatar_id, c.clip_id from avatar_clips c join avatars a on a.id = c.avatar_id
    where c.upload_asset_id = ${assetId} and c.retired_at is null and a.tenant_id = ${tenantId} and a.deleted_at is null
    order by c.avatar_id, c.clip_id limit ${USERS_NAMED_MAX}`;
  return {
    avatarIds: avatars.map((r) => r.id),
    clips: clips.map((r) => ({ avatarId: r.avatar_id, clipId: r.clip_id })),
  };
}

export const isUsed = (u: AssetUsers): boolean => u.avatarIds.length > 0 || u.clips.length > 0;
