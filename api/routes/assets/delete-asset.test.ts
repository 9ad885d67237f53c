import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../../core/platform/errors.ts';
import { newId } from '../../../core/platform/ids.ts';
import { json, testApi, waitFor } from '../../../test/helpers.ts';
import { mp4 } from './test-media.ts';
import { ASSETS, failedImport, uploadPng } from './test-support.ts';

const t = await testApi();
afterAll(() => t.close());

interface Answer {
  code?: string;
  field?: string | null;
  error?: string;
  usedBy?: { avatarIds: string[]; clips: { avatarId: string; clipId: string }[] };
}

async function remove(key: string, id: string) {
  const res = await t.request('DELETE', `${ASSETS}/${id}`, { key });
  const text = await res.text();
  return { res, text, body: (text ? JSON.parse(text) : {}) as Answer };
}

async function storageKeyOf(id: string): Promise<string | null> {
  const [r] = await t.services.sql<{ storage_key: string | null }[]>`select storage_key from assets where id = ${id}`;
  return r!.storage_key;
}

/** An avatar made from the portrait through the API (its generation is queued; no worker runs here). */
async function avatarFrom(key: string, assetId: string): Promise<string> {
  const res = await t.request('POST', '/api/v1/avatars', {
    key,
    body: { displayName: 'Ada', sourceKind: 'image', sourceAssetId: assetId },
  });
  expect(res.status).toBe(201);
  return (await json<{ id: string }>(res)).id;
}

/** A ready video asset (an uploaded clip's source). */
async function videoAsset(tenantId: string): Promise<string> {
  return (await t.services.assets.createUploaded({ tenantId, source: Readable.from([mp4()]), declaredKind: 'video' }))
    .id;
}

async function clipOf(avatarId: string, clipId: string, uploadAssetId: string, retired = false): Promise<void> {
  await t.services.sql`
    insert into avatar_clips (avatar_id, clip_id, status, source_kind, upload_asset_id, retired_at)
    values (${avatarId}, ${clipId}, 'ready', 'upload', ${uploadAssetId}, ${retired ? new Date() : null})`;
}

describe('DELETE /assets/{assetId}', () => {
  it('happy: 204, the bytes are removed (the earlier signed URL stops serving), and the asset is 404 on every read after', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const asset = await uploadPng(t, apiKey);
    const key = (await storageKeyOf(asset.id))!;
    const signed = new URL(asset.publicUrl!);
    expect((await t.request('GET', signed.pathname + signed.search)).status).toBe(200);

    const { res, text } = await remove(apiKey, asset.id);
    expect(res.status).toBe(204);
    expect(text).toBe('');
    expect(await t.services.storage.stat(key)).toBeUndefined();
    expect((await t.request('GET', signed.pathname + signed.search)).status).toBe(404);
    expect((await t.request('GET', `${ASSETS}/${asset.id}`, { key: apiKey })).status).toBe(404);
    expect((await json<{ data: unknown[] }>(await t.request('GET', ASSETS, { key: apiKey }))).data).toEqual([]);
    expect(await t.services.assets.get(tenantId, asset.id)).toBeUndefined();
    await expect(t.services.assets.readBytes(tenantId, asset.id)).rejects.toThrow();
    const again = await remove(apiKey, asset.id);
    expect(again.res.status).toBe(404);
    expect(again.body.code).toBe('not_found');
  });

  it('happy: failed and pending imports (no bytes) can be deleted', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const failed = await failedImport(t, tenantId);
    const pending = (await t.services.assets.createPending({ tenantId, kind: 'video' })).id;
    expect((await remove(apiKey, failed)).res.status).toBe(204);
    expect((await remove(apiKey, pending)).res.status).toBe(204);
    expect((await json<{ data: unknown[] }>(await t.request('GET', ASSETS, { key: apiKey }))).data).toEqual([]);
  });

  it('error: 409 asset_in_use naming the avatars whose portrait it is and the clips whose source it is; nothing deleted', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const portrait = await uploadPng(t, apiKey);
    const [a1, a2] = [await avatarFrom(apiKey, portrait.id), await avatarFrom(apiKey, portrait.id)];
    const video = await videoAsset(tenantId);
    await clipOf(a1, 'wave', video);
    await clipOf(a2, 'nod', video);

    const used = await remove(apiKey, portrait.id);
    expect(used.res.status).toBe(409);
    expect(used.body).toMatchObject({ code: 'asset_in_use', status: 409, retryable: false, usedBy: { clips: [] } });
    expect([...used.body.usedBy!.avatarIds].sort()).toEqual([a1, a2].sort());
    expect(used.body.error).toContain(a1);
    const clipUsed = await remove(apiKey, video);
    expect(clipUsed.res.status).toBe(409);
    expect(clipUsed.body.usedBy?.avatarIds).toEqual([]);
    expect(clipUsed.body.usedBy?.clips).toHaveLength(2);
    expect(clipUsed.body.usedBy?.clips).toEqual(
      expect.arrayContaining([
        { avatarId: a1, clipId: 'wave' },
        { avatarId: a2, clipId: 'nod' },
      ]),
    );
    expect(clipUsed.body.error).toMatch(/clip (wave|nod) of avatar/);
    expect((await t.request('GET', `${ASSETS}/${portrait.id}`, { key: apiKey })).status).toBe(200);
    expect(await t.services.storage.stat((await storageKeyOf(video))!)).toBeDefined();
  });

  it('happy: once its avatars are deleted and its clips retired, the asset can be deleted', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const portrait = await uploadPng(t, apiKey);
    const avatarId = await avatarFrom(apiKey, portrait.id);
    const video = await videoAsset(tenantId);
    await clipOf(avatarId, 'old', video, true);
    expect((await remove(apiKey, video)).res.status).toBe(204);
    expect((await remove(apiKey, portrait.id)).res.status).toBe(409);
    expect((await t.request('DELETE', `/api/v1/avatars/${avatarId}`, { key: apiKey })).status).toBe(204);
    expect((await remove(apiKey, portrait.id)).res.status).toBe(204);
  });

  it('error: a deleted asset can no longer become a portrait or a clip source (422 naming the field)', async () => {
    const { apiKey } = await t.newTenant();
    const asset = await uploadPng(t, apiKey);
    expect((await remove(apiKey, asset.id)).res.status).toBe(204);
    const res = await t.request('POST', '/api/v1/avatars', {
      key: apiKey,
      body: { displayName: 'Ada', sourceKind: 'image', sourceAssetId: asset.id },
    });
    expect(res.status).toBe(422);
    expect(await json(res)).toMatchObject({ code: 'validation_error', field: 'sourceAssetId' });
  });

  it('error: a delete waits for a writer holding the asset, then sees its use (409); a writer after a delete finds it gone', async () => {
    const { tenantId } = await t.newTenant();
    const { assets, sql } = t.services;
    const held = await assets.createUploaded({ tenantId, source: Readable.from([mp4()]) });
    const avatarId = newId('avatar');
    let outcome: Promise<unknown> | undefined;
    await sql.begin(async (tx) => {
      expect(await assets.holdForUse(tx, tenantId, held.id)).toBe(true);
      await tx`insert into avatars (id, tenant_id, display_name, status, source_asset_id) values (${avatarId}, ${tenantId}, 'Ada', 'draft', ${held.id})`;
      outcome = assets.remove(tenantId, held.id).then(
        () => 'deleted',
        (e: unknown) => e,
      );
      // The delete is blocked on the row lock this transaction holds.
      await waitFor('the delete to wait on the asset row', async () => {
        const [r] = await sql<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and query like '%from assets where id = %for update%'`;
        return r!.n > 0 ? true : undefined;
      });
      expect(await Promise.race([outcome, Promise.resolve('waiting')])).toBe('waiting');
    });
    const err = await outcome;
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe('asset_in_use');

    const free = await assets.createUploaded({ tenantId, source: Readable.from([mp4()]) });
    await assets.remove(tenantId, free.id);
    expect(await sql.begin((tx) => assets.holdForUse(tx, tenantId, free.id))).toBe(false);
  });

  it('error: 401 without a key; 403 with a read-only key; 404 for an unknown id or one that cannot be an asset id', async () => {
    const { apiKey, tenantId } = await t.newTenant();
    const asset = await uploadPng(t, apiKey);
    expect((await t.request('DELETE', `${ASSETS}/${asset.id}`)).status).toBe(401);
    // A second key of the same workspace that may only read.
    const readOnly = await t.services.keys.create({
      tenantId,
      name: 'reader',
      scopes: ['avatars:read'],
      spendLimitCreditMicros: null,
    });
    const forbidden = await remove(readOnly.apiKey, asset.id);
    expect(forbidden.res.status).toBe(403);
    expect(forbidden.body).toMatchObject({ code: 'forbidden', requiredScope: 'avatars:write' });
    for (const id of ['ast_doesnotexist', 'nope', `ast_${'z'.repeat(80)}`]) {
      const { res, body } = await remove(apiKey, id);
      expect(res.status, id).toBe(404);
      expect(body.code, id).toBe('not_found');
    }
    expect((await t.request('GET', `${ASSETS}/${asset.id}`, { key: apiKey })).status).toBe(200);
  });

  it("security: another tenant's asset is 404 and stays, bytes included", async () => {
    const owner = await t.newTenant();
    const other = await t.newTenant();
    const theirs = await uploadPng(t, owner.apiKey);
    const { res, body } = await remove(other.apiKey, theirs.id);
    expect(res.status).toBe(404);
    expect(body.code).toBe('not_found');
    expect((await t.request('GET', `${ASSETS}/${theirs.id}`, { key: owner.apiKey })).status).toBe(200);
    expect(await t.services.storage.stat((await storageKeyOf(theirs.id))!)).toBeDefined();
  });
});
