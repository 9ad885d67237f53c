export * from './types.ts';
export {
  AssetIngestError,
  assetInUse,
  AssetStore,
  assetStorageKey,
  failureCode,
  MAX_LIST,
  RemoteImportError,
  type AssetListQuery,
  type IngestFailure,
  type StoredBytes,
} from './store.ts';
export { assetUsers, USERS_NAMED_MAX, type AssetUsers } from './references.ts';
export { sniff } from './sniff.ts';
