export * from './types.ts';
export { AssetIngestError, AssetStore, MAX_LIST, RemoteImportError, type StoredBytes } from './store.ts';
export { sniff } from './sniff.ts';
