import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * A secret the process needs (media URL signing, the dashboard's vault): the configured one when
 * given (several API processes must share it), otherwise a random one made once in `dataDir/file`
 * with mode 0600 and read back on every later start.
 */
export function loadLocalSecret(dataDir: string, file: string, configured?: string): string {
  if (configured) return configured;
  const at = path.join(dataDir, file);
  mkdirSync(dataDir, { recursive: true });
  try {
    // 'wx': create only if absent, so concurrent first starts cannot overwrite each other's secret.
    writeFileSync(at, randomBytes(32).toString('base64url'), { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const secret = readFileSync(at, 'utf8').trim();
  if (secret.length < 16) throw new Error(`${at} holds no usable secret: delete it to have a new one made`);
  return secret;
}
