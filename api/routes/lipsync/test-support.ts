import { expect } from 'vitest';
import { json, type testApi } from '../../../test/helpers.ts';
import { multipart } from '../assets/test-media.ts';

/** Uploads bytes as an asset of the key's workspace through the API; returns its signed publicUrl. */
export async function uploadAsset(
  t: Awaited<ReturnType<typeof testApi>>,
  key: string,
  bytes: Buffer,
  filename: string,
): Promise<string> {
  const form = multipart([{ name: 'file', value: bytes, filename }]);
  const res = await t.request('POST', '/api/v1/assets', {
    key,
    rawBody: form.body,
    headers: { 'content-type': form.contentType },
  });
  const body = await json<{ publicUrl: string }>(res);
  expect(res.status, JSON.stringify(body)).toBe(201);
  return body.publicUrl;
}
