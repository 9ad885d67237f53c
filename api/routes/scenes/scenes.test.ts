import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { text } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RenderProcesses } from '../../../core/avatars/render-process.ts';
import { SafeFetcher } from '../../../core/platform/net/safe-fetch.ts';
import { SceneBuildWorker } from '../../../core/scenes/builder.ts';
import { loadSceneMedia, sceneForMint } from '../../../core/scenes/media.ts';
import type { FrameCacheManifest } from '../../../render/framecache/index.ts';
import { testVideo } from '../../../render/framecache/test-videos.ts';
import { json, testApi, waitFor } from '../../../test/helpers.ts';

/**
 * Scenes end to end: POST /scenes and GET /scenes/{id} over the API, the build as a durable job
 * (the real queue, ffmpeg and face rig), clips served by a local origin (exempted from the address
 * rules by the test-only allowlist: every other loopback or private target stays refused).
 */
const t = await testApi({ env: { SCENE_MAX_BYTES: '5000000' } });
const renders = new RenderProcesses();
let origin: http.Server;
let base: string;
const files = new Map<string, Buffer>();
let hits: string[] = [];

const CLIP = testVideo({ seconds: 2 });
const SHORT = testVideo({ seconds: 1, width: 360, height: 640 });
const BRICK = testVideo({ fixture: 'brick', seconds: 2 });
const TEXT = Buffer.from('this is a text file, not a video\n'.repeat(20));

beforeAll(async () => {
  files.set('/clip.mp4', CLIP).set('/short.mp4', SHORT).set('/brick.mp4', BRICK).set('/notes.txt', TEXT);
  origin = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    const body = files.get(req.url ?? '');
    if (!body) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(body.length) });
    res.end(body);
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  const port = (origin.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
  t.services.safeFetch = new SafeFetcher({ allowAddresses: [`127.0.0.1:${port}`] });
  await new SceneBuildWorker({
    sql: t.services.sql,
    jobs: t.services.jobs,
    storage: t.services.storage,
    log: t.services.log,
    renders,
    fetcher: t.services.safeFetch,
    concurrency: 1,
    maxBytes: 5_000_000,
    maxSeconds: 10,
    frameSize: 512,
  }).start();
});
afterAll(async () => {
  origin.closeAllConnections();
  await new Promise((r) => origin.close(r));
  await t.close();
  await t.services.safeFetch.close();
  renders.killAll();
});

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
/** The documented id formula, computed here independently of the server's code. */
const idOf = (b: Buffer) =>
  `scn_${createHash('sha256')
    .update(`${md5(b)}:${b.length}`)
    .digest('hex')
    .slice(0, 32)}`;

interface SceneBody {
  scene_id: string;
  status: string;
  continuation: string;
  source: { md5: string | null; bytes: number | null };
  video_cache_id: string | null;
  frame_count: number | null;
  cycle_frame_count: number | null;
  fps: number | null;
  width: number | null;
  height: number | null;
  duration_seconds: number | null;
  error: string | null;
  error_message: string | null;
  expires_at: string | null;
  code?: string;
  field?: string;
}

async function workspace(o: { scenes?: boolean } = {}) {
  const { apiKey, tenantId } = await t.newTenant();
  if (o.scenes !== false) await t.services.tenants.setSwitch(tenantId, 'scene_sessions', true);
  return { key: apiKey, tenantId };
}

async function post(key: string, body: unknown) {
  const res = await t.request('POST', '/api/v1/scenes', { key, body });
  return { status: res.status, body: await json<SceneBody>(res) };
}

async function get(key: string, id: string) {
  const res = await t.request('GET', `/api/v1/scenes/${id}`, { key });
  return { status: res.status, body: await json<SceneBody>(res) };
}

/** Polls GET until the scene leaves building. */
async function settled(key: string, id: string): Promise<SceneBody> {
  return waitFor(`scene ${id} to settle`, async () => {
    const r = await get(key, id);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body.status === 'building' ? undefined : r.body;
  });
}

const named = (path: string, b: Buffer, extra: Record<string, unknown> = {}) => ({
  source: { url: `${base}${path}`, md5: md5(b), bytes: b.length },
  profile: 'scene-v0',
  ...extra,
});
const countScenes = async (tenantId: string) =>
  Number((await t.services.sql<{ n: string }[]>`select count(*) as n from scenes where tenant_id = ${tenantId}`)[0]!.n);
const countJobs = async (sceneId: string) =>
  Number(
    (
      await t.services.sql<
        { n: string }[]
      >`select count(*) as n from pgboss.job where name = 'scene-build' and data->>'sceneId' = ${sceneId}`
    )[0]!.n,
  );

describe('POST /scenes and GET /scenes/{id}', { timeout: 300_000 }, () => {
  it('happy: md5 and bytes give the id at once (202 building), the build makes it ready with its frame cache; posting again is 200 ready at once', async () => {
    const w = await workspace();
    hits = [];
    const first = await post(w.key, named('/clip.mp4', CLIP));
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    expect(first.body).toMatchObject({
      scene_id: idOf(CLIP),
      status: 'building',
      continuation: 'loop',
      source: { md5: md5(CLIP), bytes: CLIP.length },
      video_cache_id: null,
      error: null,
    });
    // A mint naming it (its video cache id derives from the content) finds it building, not missing.
    const vc = `vc_${createHash('sha256').update(`scene-v0:${first.body.scene_id}`).digest('hex').slice(0, 32)}`;
    expect(await sceneForMint(t.services.sql, w.tenantId, vc)).toMatchObject({ sceneId: first.body.scene_id });
    expect(await sceneForMint(t.services.sql, (await workspace()).tenantId, vc)).toBeUndefined();
    // Nothing was downloaded by the POST itself: the build job does it.
    const ready = await settled(w.key, first.body.scene_id);
    expect(ready.video_cache_id).toBe(vc);
    expect(await sceneForMint(t.services.sql, w.tenantId, vc)).toMatchObject({
      status: 'ready',
      media: { sceneId: ready.scene_id, continuation: 'loop' },
    });
    expect(ready, JSON.stringify(ready)).toMatchObject({
      status: 'ready',
      frame_count: 50,
      cycle_frame_count: 50,
      fps: 25,
      width: 512,
      height: 288,
      duration_seconds: 2,
      error: null,
    });
    expect(ready.video_cache_id).toMatch(/^vc_[0-9a-f]{32}$/);
    expect(hits).toEqual(['/clip.mp4']);
    // What a scene call plays: the frame cache in storage, found by the video cache id.
    const media = await loadSceneMedia(t.services.sql, w.tenantId, ready.video_cache_id!);
    expect(media).toMatchObject({ sceneId: ready.scene_id, continuation: 'loop' });
    const manifest = JSON.parse(
      await text(await t.services.storage.get(`${media!.cacheKey}/manifest.json`)),
    ) as FrameCacheManifest;
    expect(manifest).toMatchObject({
      frameCount: 50,
      width: 512,
      height: 288,
      fps: 25,
      landmarkCount: 468,
      meta: { sceneId: ready.scene_id, fit: 'contain' },
    });
    expect(await t.services.storage.stat(`${media!.cacheKey}/frames.bin`)).toBeDefined();

    // The same clip again, with md5 and bytes: ready at once, no new build; the continuation follows the latest POST.
    const again = await post(w.key, named('/clip.mp4', CLIP, { continuation: 'pingpong' }));
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      scene_id: ready.scene_id,
      status: 'ready',
      video_cache_id: ready.video_cache_id,
      continuation: 'pingpong',
      cycle_frame_count: 98,
    });
    expect(await countJobs(ready.scene_id)).toBe(1);
    expect(new Date(again.body.expires_at!).getTime()).toBeGreaterThanOrEqual(new Date(ready.expires_at!).getTime());
    expect((await loadSceneMedia(t.services.sql, w.tenantId, ready.video_cache_id!))!.continuation).toBe('pingpong');
  });

  it('happy: without md5 and bytes the POST downloads the clip to know its id, and the build uses those bytes', async () => {
    const w = await workspace();
    hits = [];
    const r = await post(w.key, {
      source: { url: `${base}/short.mp4` },
      continuation: 'pingpong',
      profile: 'scene-v0',
    });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    expect(r.body).toMatchObject({ scene_id: idOf(SHORT), source: { md5: md5(SHORT), bytes: SHORT.length } });
    const ready = await settled(w.key, r.body.scene_id);
    // A portrait clip (360x640) keeps its aspect inside the 512 box.
    expect(ready).toMatchObject({
      status: 'ready',
      width: 288,
      height: 512,
      frame_count: 25,
      cycle_frame_count: 48,
      continuation: 'pingpong',
    });
    expect(hits).toEqual(['/short.mp4']);
    // The staged copy of the clip is gone once built.
    const [row] = await t.services.sql<
      { source_key: string | null }[]
    >`select source_key from scenes where id = ${r.body.scene_id}`;
    expect(row!.source_key).toBeNull();
    // The same bytes, named this time: the same scene, ready at once.
    expect((await post(w.key, named('/short.mp4', SHORT))).body).toMatchObject({
      scene_id: r.body.scene_id,
      status: 'ready',
    });
  });

  it('error: an unreachable URL is source_unreachable: stored when md5 and bytes named it, "unresolved" (nothing stored) otherwise', async () => {
    const w = await workspace();
    const r = await post(w.key, {
      source: { url: `${base}/gone.mp4`, md5: md5(CLIP), bytes: CLIP.length },
      profile: 'scene-v0',
    });
    expect(r.status).toBe(202);
    expect(await settled(w.key, r.body.scene_id)).toMatchObject({
      status: 'failed',
      error: 'source_unreachable',
      error_message: expect.stringContaining('HTTP 404'),
      video_cache_id: null,
    });
    const before = await countScenes(w.tenantId);
    const u = await post(w.key, { source: { url: `${base}/gone.mp4` }, profile: 'scene-v0' });
    expect(u.status).toBe(200);
    expect(u.body).toMatchObject({
      scene_id: 'unresolved',
      status: 'failed',
      error: 'source_unreachable',
      expires_at: null,
    });
    expect(await countScenes(w.tenantId)).toBe(before);
    expect((await get(w.key, 'unresolved')).status).toBe(404);
  });

  it('error: bytes that are no video, and a video without a face, are source_unusable with the reason', async () => {
    const w = await workspace();
    const notVideo = await post(w.key, named('/notes.txt', TEXT));
    expect(notVideo.status).toBe(202);
    expect(await settled(w.key, notVideo.body.scene_id)).toMatchObject({
      status: 'failed',
      error: 'source_unusable',
      error_message: expect.stringContaining('(invalid_video)'),
    });
    const noFace = await post(w.key, { source: { url: `${base}/brick.mp4` }, profile: 'scene-v0' });
    expect(noFace.status).toBe(202);
    expect(await settled(w.key, noFace.body.scene_id)).toMatchObject({
      status: 'failed',
      error: 'source_unusable',
      error_message: expect.stringContaining('(face_missing)'),
    });
    expect(
      await t.services
        .sql`select 1 from scenes where tenant_id = ${w.tenantId} and (cache_key is not null or source_key is not null)`,
    ).toHaveLength(0);
  });

  it('error: bytes other than the md5 and bytes named are source_mismatch (stored under the named id); a failed scene posted again rebuilds', async () => {
    const w = await workspace();
    const wrongMd5 = { source: { url: `${base}/short.mp4`, md5: md5(CLIP), bytes: SHORT.length }, profile: 'scene-v0' };
    const a = await post(w.key, wrongMd5);
    expect(a.status).toBe(202);
    expect(await settled(w.key, a.body.scene_id)).toMatchObject({
      status: 'failed',
      error: 'source_mismatch',
      error_message: expect.stringContaining('md5'),
    });
    const wrongBytes = await post(w.key, {
      source: { url: `${base}/short.mp4`, md5: md5(SHORT), bytes: SHORT.length + 5 },
      profile: 'scene-v0',
    });
    expect(await settled(w.key, wrongBytes.body.scene_id)).toMatchObject({
      status: 'failed',
      error: 'source_mismatch',
      error_message: expect.stringContaining('bytes'),
    });
    // Without bytes, a wrong md5 is found after the POST's own download: unresolved, nothing stored.
    const u = await post(w.key, { source: { url: `${base}/short.mp4`, md5: md5(CLIP) }, profile: 'scene-v0' });
    expect(u.body).toMatchObject({ scene_id: 'unresolved', status: 'failed', error: 'source_mismatch' });
    // The failed scene, posted again: a new build (which fails the same way, the bytes being what they are).
    const retry = await post(w.key, wrongMd5);
    expect(retry.status).toBe(202);
    expect(retry.body.status).toBe('building');
    expect(await countJobs(a.body.scene_id)).toBe(2);
    await settled(w.key, a.body.scene_id);
  });

  it('happy: expiry: an expired scene is 404 and no longer playable; posting it again rebuilds it; the sweep deletes what expired', async () => {
    const w = await workspace();
    const first = await post(w.key, named('/short.mp4', SHORT));
    const ready = await settled(w.key, first.body.scene_id);
    const { cacheKey } = (await loadSceneMedia(t.services.sql, w.tenantId, ready.video_cache_id!))!;
    await t.services.sql`update scenes set expires_at = now() - interval '1 second' where tenant_id = ${w.tenantId}`;
    expect(await get(w.key, ready.scene_id)).toMatchObject({ status: 404, body: { code: 'scene_not_found' } });
    expect(await loadSceneMedia(t.services.sql, w.tenantId, ready.video_cache_id!)).toBeUndefined();
    const again = await post(w.key, named('/short.mp4', SHORT));
    expect(again.status).toBe(202);
    const rebuilt = await settled(w.key, ready.scene_id);
    expect(rebuilt).toMatchObject({ status: 'ready', video_cache_id: ready.video_cache_id });
    const media = (await loadSceneMedia(t.services.sql, w.tenantId, ready.video_cache_id!))!;
    expect(media.cacheKey).not.toBe(cacheKey);
    // The old build's cache went when the scene was rebuilt; the new one goes with the sweep.
    expect(await t.services.storage.stat(`${cacheKey}/manifest.json`)).toBeUndefined();
    await t.services.sql`update scenes set expires_at = now() - interval '1 second' where tenant_id = ${w.tenantId}`;
    expect(await t.services.scenes.expireDue()).toBeGreaterThanOrEqual(1);
    expect(await countScenes(w.tenantId)).toBe(0);
    expect(await t.services.storage.stat(`${media.cacheKey}/manifest.json`)).toBeUndefined();
  });

  it('security: a workspace reads only its own scenes: another workspace, unknown and malformed ids are 404 scene_not_found', async () => {
    const w = await workspace();
    const r = await post(w.key, named('/clip.mp4', CLIP));
    const other = await workspace();
    for (const id of [r.body.scene_id, idOf(TEXT), 'scn_nope', 'unresolved', `${r.body.scene_id}x`]) {
      const g = await get(other.key, id);
      expect(g.status, id).toBe(404);
      expect(g.body.code).toBe('scene_not_found');
    }
  });

  it('security: the workspace switch off is 403, a URL the address policy refuses is 422 naming source.url; nothing is written, nothing fetched', async () => {
    const off = await workspace({ scenes: false });
    const r = await post(off.key, named('/clip.mp4', CLIP));
    expect(r).toMatchObject({ status: 403, body: { code: 'scene_sessions_not_enabled' } });
    const w = await workspace();
    // A listener on loopback that is not the allowlisted origin (127.0.0.1 on another port): no
    // refused URL may reach it, by address or by a name that resolves to it.
    let reached = 0;
    const decoy = http.createServer((_req, res) => res.end()).on('connection', () => reached++);
    await new Promise<void>((r) => decoy.listen(0, '127.0.0.1', r));
    const decoyPort = (decoy.address() as AddressInfo).port;
    const refused = [
      'http://10.0.0.1/clip.mp4',
      'http://169.254.169.254/latest/meta-data',
      `http://localhost:${decoyPort}/clip.mp4`,
      `http://127.0.0.1:${decoyPort}/clip.mp4`,
      'http://[::1]/a.mp4',
      'ftp://example.com/a.mp4',
      'http://user:pw@example.com/a.mp4',
    ];
    for (const url of refused) {
      for (const body of [
        { source: { url }, profile: 'scene-v0' },
        { source: { url, md5: md5(CLIP), bytes: CLIP.length }, profile: 'scene-v0' },
      ]) {
        const res = await post(w.key, body);
        expect(res.status, `${url}: ${JSON.stringify(res.body)}`).toBe(422);
        expect(res.body).toMatchObject({ code: 'scene_source_rejected', field: 'source.url' });
      }
    }
    decoy.close();
    expect(reached).toBe(0);
    expect(await countScenes(w.tenantId)).toBe(0);
    expect(await countScenes(off.tenantId)).toBe(0);
  });

  it('error: bad bodies are 422 naming the field (casing, unknown fields, wrong values, bytes over the cap)', async () => {
    const w = await workspace();
    const good = named('/clip.mp4', CLIP);
    const cases: [unknown, string, string?][] = [
      [{ ...good, profile: 'scene-v1' }, 'profile'],
      [{ ...good, continuation: 'bounce' }, 'continuation'],
      [{ ...good, Continuation: 'loop' }, 'Continuation'],
      [{ ...good, video_cache_id: 'vc_x' }, 'video_cache_id'],
      [{ source: { ...good.source, URL: good.source.url }, profile: 'scene-v0' }, 'source.URL'],
      [{ source: { url: good.source.url, md5: 'xyz', bytes: 5 }, profile: 'scene-v0' }, 'source.md5'],
      [{ source: { url: good.source.url, md5: md5(CLIP), bytes: 0 }, profile: 'scene-v0' }, 'source.bytes'],
      [{ source: { url: good.source.url, md5: md5(CLIP), bytes: 1.5 }, profile: 'scene-v0' }, 'source.bytes'],
      [
        { source: { url: good.source.url, md5: md5(CLIP), bytes: 5_000_001 }, profile: 'scene-v0' },
        'source.bytes',
        'scene_source_rejected',
      ],
      [{ source: {}, profile: 'scene-v0' }, 'source.url'],
      [{ source: { url: good.source.url } }, 'profile'],
    ];
    for (const [body, field, code = 'validation_error'] of cases) {
      const r = await post(w.key, body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(r.body, JSON.stringify(body)).toMatchObject({ code, field });
    }
    expect(await countScenes(w.tenantId)).toBe(0);
  });

  it("error: a build failure that is not the clip's fault retries, then fails build_failed; a stale job changes nothing", async () => {
    const w = await workspace();
    // A scene whose staged clip storage lost (no job queued: the build is run by hand).
    const sceneId = idOf(SHORT);
    await t.services.sql`
      insert into scenes (tenant_id, id, status, profile, continuation, source_url, source_md5, source_bytes, build_id, source_key, expires_at)
      values (${w.tenantId}, ${sceneId}, 'building', 'scene-v0', 'loop', ${`${base}/short.mp4`}, ${md5(SHORT)}, ${SHORT.length}, 'bld_lost',
              ${`tenants/${w.tenantId}/scenes/sources/lost`}, now() + interval '1 hour')`;
    const worker = new SceneBuildWorker({
      sql: t.services.sql,
      jobs: t.services.jobs,
      storage: t.services.storage,
      log: t.services.log,
      renders,
      fetcher: t.services.safeFetch,
      concurrency: 1,
      maxBytes: 5_000_000,
      maxSeconds: 10,
      frameSize: 512,
    });
    const data = { tenantId: w.tenantId, sceneId, buildId: 'bld_lost' };
    await expect(worker.run(data, { id: 'j', retryCount: 0, retryLimit: 2 })).rejects.toThrow(/No stored object/);
    expect((await get(w.key, sceneId)).body.status).toBe('building');
    await worker.run(data, { id: 'j', retryCount: 2, retryLimit: 2 });
    expect((await get(w.key, sceneId)).body).toMatchObject({
      status: 'failed',
      error: 'build_failed',
      error_message: 'The scene build failed after 3 attempts',
    });
    // A job of another build (an earlier one) does nothing, whatever state the row is in.
    await t.services
      .sql`update scenes set status = 'building', error = null where id = ${sceneId} and tenant_id = ${w.tenantId}`;
    await worker.run({ ...data, buildId: 'bld_earlier' }, { id: 'j', retryCount: 2, retryLimit: 2 });
    expect((await get(w.key, sceneId)).body).toMatchObject({ status: 'building' });
  });
});

describe('POST /scenes when the builder cannot run', () => {
  it('error: 503 scene_builder_unavailable (retryable), nothing written', async () => {
    const broken = await testApi({ env: { FFMPEG_PATH: '/nonexistent/ffmpeg' } });
    try {
      const { apiKey, tenantId } = await broken.newTenant();
      await broken.services.tenants.setSwitch(tenantId, 'scene_sessions', true);
      const res = await broken.request('POST', '/api/v1/scenes', {
        key: apiKey,
        body: {
          source: { url: 'https://93.184.215.14/clip.mp4', md5: md5(CLIP), bytes: CLIP.length },
          profile: 'scene-v0',
        },
      });
      expect(res.status).toBe(503);
      expect(await json(res)).toMatchObject({
        code: 'scene_builder_unavailable',
        retryable: true,
        error: expect.stringContaining('ffmpeg'),
      });
      expect(await broken.services.sql`select 1 from scenes`).toHaveLength(0);
      expect(
        await broken.services.sql`select 1 from pgboss.job where name = 'scene-build'`.catch(() => []),
      ).toHaveLength(0);
    } finally {
      await broken.close();
    }
  });
});
