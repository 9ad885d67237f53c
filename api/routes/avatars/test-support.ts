import type { Avatar } from '../../../core/avatars/types.ts';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestApi } from '../../../test/helpers.ts';

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../render/rig/fixtures');

export type Fixture = 'astronaut' | 'grace_hopper' | 'cameraman' | 'brick' | 'rocket';

export function fixtureBytes(name: Fixture): Buffer {
  return readFileSync(path.join(FIXTURES, `${name}.jpg`));
}

/**
 * A stored image asset of `tenantId` (bytes in object storage, a row in `assets`), as an upload
 * would leave it. `status` and `kind` can be set to make unusable ones.
 */
export async function portraitAsset(
  t: TestApi,
  tenantId: string,
  o: { fixture?: Fixture; status?: 'ready' | 'pending_upload' | 'failed'; kind?: 'image' | 'video' | 'audio' } = {},
): Promise<string> {
  return t.storeAsset(tenantId, fixtureBytes(o.fixture ?? 'astronaut'), {
    kind: o.kind ?? 'image',
    contentType: 'image/jpeg',
    status: o.status ?? 'ready',
  });
}

/** An avatar answer as tests read it: the wire Avatar, or an error body. */
export type AvatarBody = Avatar & { code?: string; field?: string | null };

export async function call(
  t: TestApi,
  key: string,
  method: string,
  url: string,
  body?: unknown,
  headers?: Record<string, string>,
) {
  const res = await t.request(method, url, {
    key,
    ...(body !== undefined ? { body } : {}),
    ...(headers ? { headers } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as AvatarBody, res };
}
