export * from './types.ts';
export { AssetIngestError, AssetStore, assetStorageKey, failureCode, MAX_LIST, RemoteImportError, type IngestFailure, type StoredBytes } from './store.ts';
export { sniff } from './sniff.ts';
