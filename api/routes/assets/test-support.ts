import { expect } from 'vitest';
import { json, type TestApi } from '../../../test/helpers.ts';
import { multipart, png } from './test-media.ts';

/** An asset as the tests read it off the wire. */
export interface WireAsset {
  id: string;
  tenantId: string;
  kind: string;
  status: string;
  publicUrl: string | null;
  error: string | null;
  createdAt: string;
}

export const ASSETS = '/api/v1/assets';

/** Uploads a small PNG (201) and answers the asset. */
export async function uploadPng(t: TestApi, key: string): Promise<WireAsset> {
  const { body, contentType } = multipart([{ name: 'file', value: await png(), filename: 'a.png' }]);
  const res = await t.request('POST', ASSETS, { key, rawBody: body, headers: { 'content-type': contentType } });
  expect(res.status).toBe(201);
  return json<WireAsset>(res);
}

/** A `failed` remote-import row, as a refused import leaves it (no bytes). */
export async function failedImport(t: TestApi, tenantId: string, error = 'remote_url_refused'): Promise<string> {
  const pending = await t.services.assets.createPending({
    tenantId,
    kind: 'image',
    sourceUrl: 'http://10.0.0.1/x.png',
  });
  await t.services.assets.markFailed(tenantId, pending.id, error);
  return pending.id;
}
