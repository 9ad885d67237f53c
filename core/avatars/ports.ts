import type { Tx } from '../platform/db/index.ts';

/** What avatars need to know about an asset. */
interface PortraitAsset {
  id: string;
  tenantId: string;
  kind: 'image' | 'video' | 'audio';
  status: 'pending_upload' | 'ready' | 'failed';
}

/**
 * The slice of the asset store (core/assets AssetStore) avatars use: look up a tenant's asset, read
 * its bytes, and hold it (inside the writing transaction) against a concurrent delete while it
 * becomes a portrait or a clip source; false when it is gone.
 */
export interface PortraitAssets {
  get(tenantId: string, assetId: string): Promise<PortraitAsset | undefined>;
  readBytes(tenantId: string, assetId: string): Promise<Buffer>;
  holdForUse(tx: Tx, tenantId: string, assetId: string): Promise<boolean>;
}
