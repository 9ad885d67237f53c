import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { loadLocalSecret } from '../platform/local-secret.ts';

/** File under DATA_DIR holding the dashboard's encryption secret when DASHBOARD_SECRET_KEY is not set. */
const DASHBOARD_SECRET_FILE = 'dashboard-secret.key';

/**
 * The secret the vault's key is derived from: DASHBOARD_SECRET_KEY when configured (every API
 * process must share it), otherwise a random one made once in DATA_DIR with mode 0600, as the
 * media signing secret is.
 */
export function loadDashboardSecret(dataDir: string, configured?: string): string {
  return loadLocalSecret(dataDir, DASHBOARD_SECRET_FILE, configured);
}

export interface Sealed {
  iv: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
}

/**
 * AES-256-GCM with a key derived from the dashboard secret for this one use. Each value is bound to
 * what it belongs to (`context`, e.g. the API key's id, as additional data): a ciphertext copied onto
 * another row fails to open.
 */
export class KeyVault {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = createHash('sha256').update('avatar-platform dashboard key vault v1\n').update(secret).digest();
  }

  seal(plain: string, context: string): Sealed {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return { iv, ciphertext, tag: cipher.getAuthTag() };
  }

  /** The plain value; throws when the ciphertext, its context or the secret differ from the sealing's. */
  open(sealed: Sealed, context: string): string {
    const decipher = createDecipheriv('aes-256-gcm', this.key, sealed.iv);
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(sealed.tag);
    return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]).toString('utf8');
  }
}
