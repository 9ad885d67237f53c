import path from 'node:path';
import type { Config } from '../config.ts';
import { LocalStorage } from './local.ts';
import { S3Storage } from './s3.ts';
import { loadSigningSecret, MediaSigner } from './signing.ts';
import type { ObjectStorage } from './types.ts';

export * from './types.ts';
export { LocalStorage, MEDIA_PATH } from './local.ts';
/** S3-compatible storage when S3_BUCKET is set, otherwise DATA_DIR/media served by the app. */
export function createStorage(config: Config): ObjectStorage {
  if (config.S3_BUCKET) {
    return new S3Storage({
      bucket: config.S3_BUCKET,
      region: config.S3_REGION,
      endpoint: config.S3_ENDPOINT,
      accessKeyId: config.S3_ACCESS_KEY_ID,
      secretAccessKey: config.S3_SECRET_ACCESS_KEY,
    });
  }
  const secret = loadSigningSecret(config.dataDir, config.MEDIA_SIGNING_SECRET);
  return new LocalStorage(path.join(config.dataDir, 'media'), new MediaSigner(secret), config.publicBaseUrl);
}
