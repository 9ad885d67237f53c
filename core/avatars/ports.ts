/** What avatars need to know about an asset. */
export interface PortraitAsset {
  id: string;
  tenantId: string;
  kind: 'image' | 'video' | 'audio';
  status: 'pending_upload' | 'ready' | 'failed';
}

/** The slice of the asset store (core/assets AssetStore) avatars use: look up a tenant's asset, read its bytes. */
export interface PortraitAssets {
  get(tenantId: string, assetId: string): Promise<PortraitAsset | undefined>;
  readBytes(tenantId: string, assetId: string): Promise<Buffer>;
}
