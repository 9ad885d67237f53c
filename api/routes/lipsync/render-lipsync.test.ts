import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MICROS_PER_SECOND } from '../../../core/credits/ledger.ts';
import { newId } from '../../../core/platform/ids.ts';
import type { LocalStorage } from '../../../core/platform/storage/index.ts';
import type { MediaSigner } from '../../../core/platform/storage/signing.ts';
import { closeTts } from '../../../render/tts/index.ts';
import { convertAudio, speechWav } from '../../../test/audio.ts';
import { json, testApi } from '../../../test/helpers.ts';
import { png } from '../assets/test-media.ts';
import { uploadAsset } from './test-support.ts';
import { fixtureBytes, portraitAsset } from '../avatars/test-support.ts';

/**
 * POST /lipsync end to end: real speech (the embedded TTS, converted by ffmpeg), real renders in
 * child processes, real storage and billing. A URL on this machine's loopback cannot pass the safe
 * fetcher, so the happy paths use the service's own signed URLs (uploaded assets' publicUrl), which
 * are read from storage; the network path is tested for its refusals.
 */
const MAX_SECONDS = 4;
const t = await testApi({
  env: { LIPSYNC_MAX_AUDIO_SECONDS: String(MAX_SECONDS), LIPSYNC_PORTRAIT_LOOP_SECONDS: '2' },
});
const L = '/api/v1/lipsync';

let speech: { wav: Buffer; seconds: number };
let mp3: Buffer;
let origin: http.Server;
let originPort = 0;

beforeAll(async () => {
  speech = await speechWav('Hello, I am speaking from a file.');
  mp3 = convertAudio(speech.wav, 'mp3');
  origin = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'audio/wav' });
    res.end(speech.wav);
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  originPort = (origin.address() as AddressInfo).port;
}, 60_000);
afterAll(async () => {
  origin.closeAllConnections();
  await new Promise((r) => origin.close(r));
  await closeTts();
  await t.close();
});

/** Uploads bytes as an asset of the key's workspace through the API; returns its signed publicUrl. */
const upload = (key: string, bytes: Buffer, filename: string) => uploadAsset(t, key, bytes, filename);

async function lipsync(key: string, body: unknown) {
  const res = await t.request('POST', L, { key, body });
  return { status: res.status, body: await json<Record<string, unknown>>(res), res };
}

async function wallet(tenantId: string) {
  return t.services.ledger.balance(tenantId);
}

async function usageRows(tenantId: string) {
  return t.services.sql<
    {
      id: string;
      kind: string;
      status: string;
      avatar_id: string | null;
      billed_credit_micros: number;
      billable_ms: number;
    }[]
  >`
    select id, kind, status, avatar_id, billed_credit_micros, billable_ms from session_usage where tenant_id = ${tenantId} order by created_at`;
}

/** The MP4 behind a signed URL, fetched without the API key as any client would (the app serves local media). */
async function fetchMedia(url: string, headers: Record<string, string> = {}) {
  const u = new URL(url);
  return t.app.request(u.pathname + u.search, { headers });
}

function probe(bytes: Buffer): {
  streams: { codec_name: string; codec_type: string; nb_frames?: string; duration: string; r_frame_rate: string }[];
} {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lipsync-probe-'));
  const file = path.join(dir, 'out.mp4');
  writeFileSync(file, bytes);
  return JSON.parse(
    execFileSync(
      'ffprobe',
      [
        '-v',
        'error',
        '-count_frames',
        '-show_entries',
        'stream=codec_name,codec_type,nb_read_frames,nb_frames,duration,r_frame_rate',
        '-of',
        'json',
        file,
      ],
      { encoding: 'utf8' },
    ),
  );
}

describe('POST /lipsync', () => {
  let tenant: Awaited<ReturnType<typeof t.newTenant>>;
  let portraitUrl: string;
  let wavUrl: string;
  let registered: string;

  beforeAll(async () => {
    tenant = await t.newTenant({ credits: 60 });
    portraitUrl = await upload(tenant.apiKey, fixtureBytes('grace_hopper'), 'grace.jpg');
    wavUrl = await upload(tenant.apiKey, speech.wav, 'hello.wav');
  });

  it(
    'happy: renders a WAV over a portrait registered on the fly: a signed MP4 URL (no key, Range), billed exactly the rendered seconds',
    { timeout: 120_000 },
    async () => {
      const before = await wallet(tenant.tenantId);
      const r = await lipsync(tenant.apiKey, { audioUrl: wavUrl, portraitUrl });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const { url, avatarId, frames, fps, durationSeconds } = r.body as {
        url: string;
        avatarId: string;
        frames: number;
        fps: number;
        durationSeconds: number;
      };
      expect(fps).toBe(25);
      expect(Math.abs(frames - Math.ceil(speech.seconds * 25))).toBeLessThanOrEqual(1);
      expect(durationSeconds).toBeCloseTo(frames / fps, 9);
      expect(avatarId).toMatch(/^ava_/);
      registered = avatarId;

      // The URL works without the API key, serves an H.264 + AAC MP4 of that many frames, and honours Range.
      const full = await fetchMedia(url);
      expect(full.status).toBe(200);
      expect(full.headers.get('content-type')).toBe('video/mp4');
      const bytes = Buffer.from(await full.arrayBuffer());
      const streams = probe(bytes).streams;
      const video = streams.find((s) => s.codec_type === 'video')!;
      const audio = streams.find((s) => s.codec_type === 'audio')!;
      expect(video.codec_name).toBe('h264');
      expect(audio.codec_name).toBe('aac');
      expect(Number(video.nb_frames)).toBe(frames);
      expect(Math.abs(Number(audio.duration) - speech.seconds)).toBeLessThan(0.1);
      const part = await fetchMedia(url, { range: 'bytes=0-99' });
      expect(part.status).toBe(206);
      expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(0, 100))).toBe(true);

      // The portrait became a ready avatar of the workspace.
      const avatar = await t.request('GET', `/api/v1/avatars/${avatarId}`, { key: tenant.apiKey });
      expect(await json(avatar)).toMatchObject({ id: avatarId, status: 'ready', idleVideoStatus: 'ready' });

      // Billing: the video's seconds, exactly; nothing left reserved; one lipsync row, released.
      const after = await wallet(tenant.tenantId);
      const charged = Math.ceil((frames * MICROS_PER_SECOND) / fps);
      expect(before.balanceCreditMicros - after.balanceCreditMicros).toBe(charged);
      expect(after.reservedCreditMicros).toBe(0);
      const rows = await usageRows(tenant.tenantId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        kind: 'lipsync',
        status: 'released',
        avatar_id: avatarId,
        billed_credit_micros: charged,
        billable_ms: Math.floor((frames * 1000) / fps),
      });
    },
  );

  it(
    'happy: speaks an MP3 by avatarId, and the same portrait again finds its avatar without rigging it again',
    { timeout: 120_000 },
    async () => {
      expect(registered).toBeDefined();
      const mp3Url = await upload(tenant.apiKey, mp3, 'hello.mp3');
      const byId = await lipsync(tenant.apiKey, { audioUrl: mp3Url, avatarId: registered });
      expect(byId.status, JSON.stringify(byId.body)).toBe(200);
      expect(byId.body).toMatchObject({ avatarId: registered, fps: 25 });
      // MP3 decoding pads a little; the length stays the speech's within a couple of frames.
      expect(Math.abs((byId.body.durationSeconds as number) - speech.seconds)).toBeLessThan(0.15);

      const avatarsBefore = await t.services.sql`select id from avatars where tenant_id = ${tenant.tenantId}`;
      const again = await lipsync(tenant.apiKey, { audioUrl: wavUrl, portraitUrl });
      expect(again.status, JSON.stringify(again.body)).toBe(200);
      expect(again.body.avatarId).toBe(registered);
      const avatarsAfter = await t.services.sql`select id from avatars where tenant_id = ${tenant.tenantId}`;
      expect(avatarsAfter.length).toBe(avatarsBefore.length);
      const rows = await usageRows(tenant.tenantId);
      expect(rows.map((r) => r.status)).toEqual(['released', 'released', 'released']);
    },
  );

  it(
    'error: refuses a portrait without a usable face (422 portrait_rejected naming portraitUrl): the usage row fails, nothing is billed',
    { timeout: 120_000 },
    async () => {
      const w = await t.newTenant({ credits: 10 });
      const brick = await upload(w.apiKey, fixtureBytes('brick'), 'brick.jpg');
      const audio = await upload(w.apiKey, speech.wav, 'a.wav');
      const before = await wallet(w.tenantId);
      const r = await lipsync(w.apiKey, { audioUrl: audio, portraitUrl: brick });
      expect(r.status, JSON.stringify(r.body)).toBe(422);
      expect(r.body).toMatchObject({ code: 'portrait_rejected', field: 'portraitUrl', retryable: false });
      expect(r.body.error).toMatch(/portraitUrl.*cannot be animated/);
      const after = await wallet(w.tenantId);
      expect(after.balanceCreditMicros).toBe(before.balanceCreditMicros);
      expect(after.reservedCreditMicros).toBe(0);
      expect(await usageRows(w.tenantId)).toMatchObject([
        { kind: 'lipsync', status: 'failed', billed_credit_micros: 0 },
      ]);
      expect(await t.services.sql`select * from avatars where tenant_id = ${w.tenantId}`).toHaveLength(0);
    },
  );

  it('error: answers 402 before rendering when the workspace cannot pay for the audio: nothing reserved, no usage row', async () => {
    const poor = await t.newTenant();
    await t.services.ledger.grant(poor.tenantId, Math.floor(MICROS_PER_SECOND / 2));
    const audio = await upload(poor.apiKey, speech.wav, 'a.wav');
    const portrait = await upload(poor.apiKey, fixtureBytes('grace_hopper'), 'g.jpg');
    const r = await lipsync(poor.apiKey, { audioUrl: audio, portraitUrl: portrait });
    expect(r.status).toBe(402);
    expect(r.body).toMatchObject({ code: 'insufficient_credits', billingUrl: '/platform/billing' });
    expect(await usageRows(poor.tenantId)).toHaveLength(0);
    expect((await wallet(poor.tenantId)).reservedCreditMicros).toBe(0);
    expect(await t.services.sql`select * from avatars where tenant_id = ${poor.tenantId}`).toHaveLength(0);
  });

  it(
    'error: refuses what is not audio, audio past the length cap and undecodable audio (422 naming audioUrl), before anything is billed',
    { timeout: 60_000 },
    async () => {
      const w = await t.newTenant({ credits: 30 });
      const image = await upload(w.apiKey, await png(16, 16), 'x.png');
      const long = await upload(
        w.apiKey,
        convertAudio(speech.wav, 'ogg', { repeat: Math.ceil((MAX_SECONDS + 1) / speech.seconds) }),
        'long.ogg',
      );
      const portrait = await upload(w.apiKey, fixtureBytes('grace_hopper'), 'g.jpg');
      const notAudio = await lipsync(w.apiKey, { audioUrl: image, portraitUrl: portrait });
      expect(notAudio.status).toBe(422);
      expect(notAudio.body).toMatchObject({
        code: 'unsupported_asset_type',
        field: 'audioUrl',
        detectedType: 'image/png',
      });
      const tooLong = await lipsync(w.apiKey, { audioUrl: long, portraitUrl: portrait });
      expect(tooLong.status, JSON.stringify(tooLong.body)).toBe(422);
      expect(tooLong.body).toMatchObject({ code: 'audio_too_long', field: 'audioUrl', maxSeconds: MAX_SECONDS });
      // A WAV header over bytes that are not audio: sniffed as audio, refused by the decoder.
      const corrupt = Buffer.concat([speech.wav.subarray(0, 12), Buffer.from('fmt '), Buffer.alloc(64, 0xff)]);
      const broken = await upload(w.apiKey, corrupt, 'broken.wav');
      const bad = await lipsync(w.apiKey, { audioUrl: broken, portraitUrl: portrait });
      expect(bad.status, JSON.stringify(bad.body)).toBe(422);
      expect(bad.body).toMatchObject({ code: 'invalid_audio', field: 'audioUrl' });
      // The decoder's reason, not the server's temp path.
      expect(bad.body.error).toMatch(/^Invalid field "audioUrl": The audio could not be decoded: \S/);
      expect(bad.body.error).not.toContain(os.tmpdir());
      expect(await usageRows(w.tenantId)).toHaveLength(0);
      expect(await wallet(w.tenantId)).toMatchObject({
        balanceCreditMicros: 30 * MICROS_PER_SECOND,
        reservedCreditMicros: 0,
      });
    },
  );

  it('security: fetches any other URL through the safe fetcher: loopback, private and link-local addresses are refused (422 remote_url_refused), other schemes are 422', async () => {
    const w = await t.newTenant({ credits: 10 });
    const cases: [string, string][] = [
      [`http://127.0.0.1:${originPort}/hello.wav`, 'remote_url_refused'],
      // The API's own host name on another port is not one of its signed media URLs: fetched, and refused.
      [`http://localhost:${originPort}/media/tenants/${w.tenantId}/x.wav`, 'remote_url_refused'],
      ['http://10.1.2.3/a.wav', 'remote_url_refused'],
      ['http://169.254.169.254/latest/meta-data', 'remote_url_refused'],
      ['http://[::1]/a.wav', 'remote_url_refused'],
      ['ftp://example.com/a.wav', 'validation_error'],
      ['file:///etc/passwd', 'validation_error'],
    ];
    for (const [audioUrl, code] of cases) {
      const own = await lipsync(w.apiKey, { audioUrl, portraitUrl: audioUrl });
      expect(own.status, audioUrl).toBe(422);
      expect(own.body, audioUrl).toMatchObject({ code, field: 'portraitUrl' });
    }
    const portrait = await upload(w.apiKey, fixtureBytes('grace_hopper'), 'g.jpg');
    for (const [audioUrl, code] of cases) {
      const r = await lipsync(w.apiKey, { audioUrl, portraitUrl: portrait });
      expect(r.status, audioUrl).toBe(422);
      expect(r.body, audioUrl).toMatchObject({ code, field: 'audioUrl' });
    }
    expect(await usageRows(w.tenantId)).toHaveLength(0);
  });

  it("security: reads the service's own signed URLs only while valid and only the workspace's own (expired: 422 media_url_expired)", async () => {
    const w = await t.newTenant({ credits: 10 });
    const portrait = await upload(w.apiKey, fixtureBytes('grace_hopper'), 'g.jpg');
    const storage = t.services.storage as LocalStorage;
    const u = new URL(wavUrl);
    const key = decodeURIComponent(u.pathname.replace(/^\/media\//, ''));
    const exp = Math.floor(Date.now() / 1000) - 10;
    const signer = (storage as unknown as { signer: MediaSigner }).signer;
    const expired = `${u.origin}/media/${key}?exp=${exp}&sig=${signer.sign(key, exp)}`;
    const mine = key.replace(`tenants/${tenant.tenantId}/`, `tenants/${w.tenantId}/`);
    const r1 = await lipsync(w.apiKey, {
      audioUrl: expired.replace(key, mine).replace(/sig=.*$/, `sig=${signer.sign(mine, exp)}`),
      portraitUrl: portrait,
    });
    expect(r1.status).toBe(422);
    expect(r1.body).toMatchObject({ code: 'media_url_expired', field: 'audioUrl' });
    // Another workspace's URL, valid or not, is not read.
    const r2 = await lipsync(w.apiKey, { audioUrl: wavUrl, portraitUrl: portrait });
    expect(r2.status).toBe(422);
    expect(r2.body).toMatchObject({ code: 'validation_error', field: 'audioUrl' });
    expect(r2.body.error).toMatch(/another workspace/);
    // A forged signature.
    const forged = wavUrl.replace(key, mine);
    const r3 = await lipsync(w.apiKey, { audioUrl: forged, portraitUrl: portrait });
    expect(r3.status).toBe(422);
    expect(r3.body.error).toMatch(/signature/);
    expect(await usageRows(w.tenantId)).toHaveLength(0);
  });

  it("error: 404 for an unknown or another workspace's avatar, 409 for one that is not ready", async () => {
    const w = await t.newTenant({ credits: 10 });
    const audio = await upload(w.apiKey, speech.wav, 'a.wav');
    expect((await lipsync(w.apiKey, { audioUrl: audio, avatarId: 'ava_doesnotexist' })).status).toBe(404);
    expect((await lipsync(w.apiKey, { audioUrl: audio, avatarId: registered })).status).toBe(404);
    const portraitId = await portraitAsset(t, w.tenantId);
    const created = await t.request('POST', '/api/v1/avatars', {
      key: w.apiKey,
      body: { displayName: 'Pending', sourceAssetId: portraitId },
    });
    const pending = (await json<{ id: string }>(created)).id;
    const r = await lipsync(w.apiKey, { audioUrl: audio, avatarId: pending });
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ code: 'avatar_state_conflict', retryable: false });
    expect(await usageRows(w.tenantId)).toHaveLength(0);
  });

  it(
    'error: a render that fails answers 502 render_failed (retryable): its usage row fails and bills nothing',
    { timeout: 60_000 },
    async () => {
      const w = await t.newTenant({ credits: 10 });
      const audio = await upload(w.apiKey, speech.wav, 'a.wav');
      // A ready avatar whose stored loop cache has a good manifest over frames that are not there:
      // the render child cannot open it.
      const assetId = await portraitAsset(t, w.tenantId);
      const id = newId('avatar');
      const cacheKey = `tenants/${w.tenantId}/avatars/${id}/loops/gen_broken/cache`;
      const [good] = await t.services.sql<
        { serving_cache_key: string }[]
      >`select serving_cache_key from avatars where id = ${registered}`;
      await t.services.storage.put(
        `${cacheKey}/manifest.json`,
        await t.services.storage.get(`${good!.serving_cache_key}/manifest.json`),
        { contentType: 'application/json' },
      );
      for (const f of ['frames.bin', 'landmarks.f32'])
        await t.services.storage.put(`${cacheKey}/${f}`, Buffer.from('truncated'), {
          contentType: 'application/octet-stream',
        });
      await t.services.avatars.createReady(w.tenantId, {
        id,
        displayName: 'Broken',
        sourceAssetId: assetId,
        generationId: 'gen_broken',
        loopKey: `${cacheKey}/../idle.mp4`,
        cacheKey,
      });
      const r = await lipsync(w.apiKey, { audioUrl: audio, avatarId: id });
      expect(r.status, JSON.stringify(r.body)).toBe(502);
      expect(r.body).toMatchObject({ code: 'render_failed', retryable: true });
      expect(await usageRows(w.tenantId)).toMatchObject([
        { kind: 'lipsync', status: 'failed', billed_credit_micros: 0, avatar_id: id },
      ]);
      expect(await wallet(w.tenantId)).toMatchObject({
        balanceCreditMicros: 10 * MICROS_PER_SECOND,
        reservedCreditMicros: 0,
      });
      expect(
        await t.services.storage.stat(`tenants/${w.tenantId}/lipsync/${(await usageRows(w.tenantId))[0]!.id}.mp4`),
      ).toBeUndefined();
    },
  );

  it('error: validates the body: exactly one of avatarId and portraitUrl, strict fields, each refusal naming its field', async () => {
    const cases: [unknown, string | null][] = [
      [{ audioUrl: wavUrl }, 'avatarId'],
      [{ audioUrl: wavUrl, avatarId: registered, portraitUrl }, 'portraitUrl'],
      [{ avatarId: registered }, 'audioUrl'],
      [{ audioUrl: wavUrl, avatarId: registered, audio_url: 'x' }, 'audio_url'],
      [{ audioUrl: 5, avatarId: registered }, 'audioUrl'],
      [{ audioUrl: '', avatarId: registered }, 'audioUrl'],
    ];
    for (const [body, field] of cases) {
      const r = await lipsync(tenant.apiKey, body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(r.body, JSON.stringify(body)).toMatchObject({ code: 'validation_error', field });
    }
    const rows = await usageRows(tenant.tenantId);
    expect(rows).toHaveLength(3);
  });
});
