import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stillMp4 } from '../core/avatars/test-support.ts';
import { SafeFetcher } from '../core/platform/net/safe-fetch.ts';
import type { ContractChecker, Schema as JsonSchema } from '../test/contract.ts';
import { closeTts } from '../render/tts/index.ts';
import { speechWav } from '../test/audio.ts';
import { json, testApi, type RequestOptions } from '../test/helpers.ts';
import { liveKitEnv } from '../test/livekit.ts';
import { multipart, png } from './routes/assets/test-media.ts';
import { portraitAsset } from './routes/avatars/test-support.ts';
import { recordingFixtures } from './routes/recordings/test-support.ts';
import { readyAvatar } from './routes/realtime/test-support.ts';
import { readyAvatar as readyTurnAvatar } from '../test/realtime.ts';
import { ROUTES } from './routes/index.ts';

/**
 * The OpenAPI document is the contract enforced. Every exchange made through `testApi().request`,
 * here and in every other test file, is checked against /openapi.json by the contract checker
 * (test/contract.ts). This file makes sure that covers every route: a real happy-path request and
 * a real error request to each, each one checked. It also checks the other direction: what a route
 * refuses by its schema, the document refuses too.
 */

// LiveKit is the test run's real server: live-call mints answer grants.
const t = await testApi({ env: { LOOP_GENERATION_CREDIT_MICROS: '1000000', ...liveKitEnv() } });
let checker: ContractChecker;
let origin: http.Server;
let file: Buffer;

beforeAll(async () => {
  checker = await t.contract();
  file = await png(12, 12);
  origin = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(file.length) });
    res.end(file);
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  // The remote-import origin is on loopback, which the fetcher refuses: exempt exactly this one.
  t.services.safeFetch = new SafeFetcher({ allowAddresses: [`127.0.0.1:${(origin.address() as AddressInfo).port}`] });
  await t.services.capacity.setPoolSlots('primary', 1000);
});
afterAll(async () => {
  await closeTts();
  origin.closeAllConnections();
  await new Promise((r) => origin.close(r));
  await t.services.safeFetch.close();
  await t.close();
});

interface Schema extends JsonSchema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
}
type Operation = {
  operationId: string;
  parameters?: { in: string }[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, unknown>;
  security?: unknown[];
};

const operations = () => Object.values(checker.doc.paths).flatMap((ops) => Object.values(ops) as Operation[]);
const resolve = (s: Schema): Schema =>
  s.$ref ? resolve(checker.doc.components.schemas[s.$ref.replace('#/components/schemas/', '')] as Schema) : s;

/** A workspace with credits, an avatar from a ready portrait, and what the happy requests need. */
async function workspace() {
  const { apiKey, tenantId } = await t.newTenant({ credits: 10 });
  const portrait = await portraitAsset(t, tenantId);
  const created = await t.request('POST', '/api/v1/avatars', {
    key: apiKey,
    body: { displayName: 'Ada', sourceKind: 'image', sourceAssetId: portrait },
  });
  expect(created.status).toBe(201);
  const avatarId = (await json<{ id: string }>(created)).id;
  return { apiKey, tenantId, portrait, avatarId };
}
type Workspace = Awaited<ReturnType<typeof workspace>>;

/** A ready video asset of the workspace (an uploaded clip's source). */
async function videoAsset(tenantId: string): Promise<string> {
  return t.storeAsset(tenantId, stillMp4('astronaut'), { kind: 'video', contentType: 'video/mp4' });
}

const recordings = recordingFixtures(t);

/** A scene POST naming its clip by md5 and bytes (202, the build queued; no worker runs here). */
function sceneBody(): Record<string, unknown> {
  const port = (origin.address() as AddressInfo).port;
  return {
    source: { url: `http://127.0.0.1:${port}/clip.mp4`, md5: '9e107d9d372bb6826bd81d3542a419d6', bytes: 43_210 },
    continuation: 'pingpong',
    profile: 'scene-v0',
  };
}

interface Call {
  method: string;
  url: string;
  opts?: RequestOptions;
  status: number;
}

/** For each operation: a happy request and an error request, made with a workspace of their own. */
const CALLS: Record<string, (w: Workspace) => Promise<{ happy: Call; error: Call }>> = {
  getCreditBalance: async (w) => ({
    happy: { method: 'GET', url: '/api/v1/credits/balance', opts: { key: w.apiKey }, status: 200 },
    error: { method: 'GET', url: '/api/v1/credits/balance', opts: { key: `${w.apiKey}x` }, status: 401 },
  }),
  listSessionUsage: async (w) => ({
    happy: {
      method: 'GET',
      url: '/api/v1/usage/sessions?from=2026-01-01T00:00:00Z&limit=5',
      opts: { key: w.apiKey },
      status: 200,
    },
    error: { method: 'GET', url: '/api/v1/usage/sessions?limit=0', opts: { key: w.apiKey }, status: 422 },
  }),
  getWorkspace: async (w) => ({
    happy: { method: 'GET', url: '/api/v1/workspace', opts: { key: w.apiKey }, status: 200 },
    error: { method: 'GET', url: '/api/v1/workspace', status: 401 },
  }),
  updateWorkspace: async (w) => ({
    happy: {
      method: 'PATCH',
      url: '/api/v1/workspace',
      opts: { key: w.apiKey, body: { allowedOrigins: ['https://app.example.com'] } },
      status: 200,
    },
    error: {
      method: 'PATCH',
      url: '/api/v1/workspace',
      opts: { key: w.apiKey, body: { allowedOrigins: ['https://app.example.com/'] } },
      status: 422,
    },
  }),
  createApiKey: async (w) => ({
    happy: {
      method: 'POST',
      url: '/api/v1/api-keys',
      opts: { key: w.apiKey, body: { name: 'backend', scopes: ['credits:read'], spendLimitCreditMicros: 60_000_000 } },
      status: 201,
    },
    error: {
      method: 'POST',
      url: '/api/v1/api-keys',
      opts: { key: w.apiKey, rawBody: '{"name":', headers: { 'content-type': 'application/json' } },
      status: 400,
    },
  }),
  listAvatars: async (w) => ({
    happy: { method: 'GET', url: '/api/v1/avatars', opts: { key: w.apiKey }, status: 200 },
    error: { method: 'GET', url: '/api/v1/avatars', status: 401 },
  }),
  createAvatar: async (w) => ({
    happy: {
      method: 'POST',
      url: '/api/v1/avatars',
      opts: {
        key: w.apiKey,
        body: { displayName: 'Grace', sourceAssetId: w.portrait, settings: { a: [1] }, voice: null },
      },
      status: 201,
    },
    error: {
      method: 'POST',
      url: '/api/v1/avatars',
      opts: { key: w.apiKey, body: { displayName: 'Grace', sourceAssetId: 'ast_nope' } },
      status: 422,
    },
  }),
  getAvatar: async (w) => ({
    happy: { method: 'GET', url: `/api/v1/avatars/${w.avatarId}`, opts: { key: w.apiKey }, status: 200 },
    error: { method: 'GET', url: '/api/v1/avatars/ava_doesnotexist', opts: { key: w.apiKey }, status: 404 },
  }),
  updateAvatar: async (w) => ({
    happy: {
      method: 'PATCH',
      url: `/api/v1/avatars/${w.avatarId}`,
      opts: { key: w.apiKey, body: { displayName: 'Ada L.', personality: 'curious', llm: null } },
      status: 200,
    },
    error: {
      method: 'PATCH',
      url: `/api/v1/avatars/${w.avatarId}`,
      opts: { key: w.apiKey, body: { portraitUrl: 'https://example.com/p.png' } },
      status: 400,
    },
  }),
  deleteAvatar: async (w) => {
    const other = await t.request('POST', '/api/v1/avatars', { key: w.apiKey, body: { displayName: 'Temp' } });
    const id = (await json<{ id: string }>(other)).id;
    return {
      happy: { method: 'DELETE', url: `/api/v1/avatars/${id}`, opts: { key: w.apiKey }, status: 204 },
      error: { method: 'DELETE', url: `/api/v1/avatars/${id}`, opts: { key: w.apiKey }, status: 404 },
    };
  },
  redirectAvatarLoop: async (w) => {
    // As if its first loop had published (no job worker here).
    await t.services.sql`update avatars set status = 'ready', idle_video_status = 'ready' where id = ${w.avatarId}`;
    const url = `/api/v1/avatars/${w.avatarId}/loop`;
    return {
      happy: {
        method: 'PUT',
        url,
        opts: { key: w.apiKey, body: { motionPrompt: 'nod slowly' }, headers: { 'idempotency-key': 'loop-1' } },
        status: 202,
      },
      error: { method: 'PUT', url, opts: { key: w.apiKey, body: { motionPrompt: 'smile' } }, status: 409 },
    };
  },
  getClipLibrary: async (w) => ({
    happy: { method: 'GET', url: `/api/v1/avatars/${w.avatarId}/clips`, opts: { key: w.apiKey }, status: 200 },
    error: { method: 'GET', url: '/api/v1/avatars/ava_doesnotexist/clips', opts: { key: w.apiKey }, status: 404 },
  }),
  putClipLibrary: async (w) => {
    const url = `/api/v1/avatars/${w.avatarId}/clips`;
    const body = {
      expectedRevision: 0,
      clips: {
        look: { source: { motionPrompt: 'look left slightly' } },
        nod: { source: { motionPrompt: 'nod', durationSeconds: 4 } },
      },
      idle: { clips: ['look'], weights: { source: 3, look: 1 } },
      on: { userSpeechStarted: { clips: ['nod'] } },
      actions: { agree: { description: 'Nod to agree', clips: ['nod'] } },
    };
    return {
      happy: {
        method: 'PUT',
        url,
        opts: { key: w.apiKey, body, headers: { 'idempotency-key': 'declare-1' } },
        status: 202,
      },
      error: { method: 'PUT', url, opts: { key: w.apiKey, body }, status: 409 },
    };
  },
  reviewClip: async (w) => {
    const upload = await videoAsset(w.tenantId);
    const url = `/api/v1/avatars/${w.avatarId}/clips`;
    const put = await t.request('PUT', url, {
      key: w.apiKey,
      body: { expectedRevision: 0, clips: { intro: { source: { assetId: upload } } } },
    });
    expect(put.status).toBe(202);
    const review = {
      clipId: 'intro',
      uploadAssetId: upload,
      expectedRevision: 1,
      expectedAnchorVersion: 1,
      reason: 'a person checked the pose',
    };
    return {
      happy: { method: 'POST', url: `${url}/review`, opts: { key: w.apiKey, body: review }, status: 204 },
      error: {
        method: 'POST',
        url: `${url}/review`,
        opts: { key: w.apiKey, body: { ...review, expectedRevision: 0 } },
        status: 409,
      },
    };
  },
  listAssets: async (w) => ({
    happy: {
      method: 'GET',
      url: '/api/v1/assets?limit=5&status=ready&kind=image',
      opts: { key: w.apiKey },
      status: 200,
    },
    error: { method: 'GET', url: '/api/v1/assets?limit=0', opts: { key: w.apiKey }, status: 422 },
  }),
  getAsset: async (w) => ({
    happy: { method: 'GET', url: `/api/v1/assets/${w.portrait}`, opts: { key: w.apiKey }, status: 200 },
    error: { method: 'GET', url: '/api/v1/assets/ast_doesnotexist', opts: { key: w.apiKey }, status: 404 },
  }),
  deleteAsset: async (w) => {
    const spare = await videoAsset(w.tenantId);
    return {
      happy: { method: 'DELETE', url: `/api/v1/assets/${spare}`, opts: { key: w.apiKey }, status: 204 },
      // The workspace's avatar is made from the portrait.
      error: { method: 'DELETE', url: `/api/v1/assets/${w.portrait}`, opts: { key: w.apiKey }, status: 409 },
    };
  },
  uploadAsset: async (w) => {
    const ok = multipart([
      { name: 'kind', value: 'image' },
      { name: 'file', value: file, filename: 'me.png', contentType: 'image/png' },
    ]);
    const bad = multipart([{ name: 'file', value: Buffer.from('%PDF-1.4\n'), filename: 'doc.pdf' }]);
    return {
      happy: {
        method: 'POST',
        url: '/api/v1/assets',
        opts: { key: w.apiKey, rawBody: ok.body, headers: { 'content-type': ok.contentType } },
        status: 201,
      },
      error: {
        method: 'POST',
        url: '/api/v1/assets',
        opts: { key: w.apiKey, rawBody: bad.body, headers: { 'content-type': bad.contentType } },
        status: 422,
      },
    };
  },
  createScene: async (w) => {
    await t.services.tenants.setSwitch(w.tenantId, 'scene_sessions', true);
    return {
      happy: { method: 'POST', url: '/api/v1/scenes', opts: { key: w.apiKey, body: sceneBody() }, status: 202 },
      error: {
        method: 'POST',
        url: '/api/v1/scenes',
        opts: { key: w.apiKey, body: { source: { url: 'http://10.0.0.1/clip.mp4' }, profile: 'scene-v0' } },
        status: 422,
      },
    };
  },
  getScene: async (w) => {
    await t.services.tenants.setSwitch(w.tenantId, 'scene_sessions', true);
    const posted = await t.request('POST', '/api/v1/scenes', { key: w.apiKey, body: sceneBody() });
    const { scene_id } = await json<{ scene_id: string }>(posted);
    return {
      happy: { method: 'GET', url: `/api/v1/scenes/${scene_id}`, opts: { key: w.apiKey }, status: 200 },
      error: {
        method: 'GET',
        url: '/api/v1/scenes/scn_00000000000000000000000000000000',
        opts: { key: w.apiKey },
        status: 404,
      },
    };
  },
  listRecordings: async (w) => {
    const [key] = await t.services.sql<{ id: string }[]>`select id from api_keys where tenant_id = ${w.tenantId}`;
    await recordings.recordings.begin(await recordings.liveSession(w.tenantId, key!.id));
    return {
      happy: { method: 'GET', url: '/api/v1/recordings?limit=10', opts: { key: w.apiKey }, status: 200 },
      error: { method: 'GET', url: '/api/v1/recordings?limit=0', opts: { key: w.apiKey }, status: 422 },
    };
  },
  getRecording: async (w) => {
    const [key] = await t.services.sql<{ id: string }[]>`select id from api_keys where tenant_id = ${w.tenantId}`;
    const { recordingId } = await recordings.recordings.begin(await recordings.liveSession(w.tenantId, key!.id));
    return {
      happy: { method: 'GET', url: `/api/v1/recordings/${recordingId}`, opts: { key: w.apiKey }, status: 200 },
      error: { method: 'GET', url: '/api/v1/recordings/rec_doesnotexist', opts: { key: w.apiKey }, status: 404 },
    };
  },
  getRecordingAccess: async (w) => {
    const [key] = await t.services.sql<{ id: string }[]>`select id from api_keys where tenant_id = ${w.tenantId}`;
    const ready = await recordings.readyRecording(await recordings.liveSession(w.tenantId, key!.id), file);
    const processing = await recordings.recordings.begin(await recordings.liveSession(w.tenantId, key!.id));
    return {
      happy: {
        method: 'GET',
        url: `/api/v1/recordings/${ready.recordingId}/access`,
        opts: { key: w.apiKey },
        status: 200,
      },
      error: {
        method: 'GET',
        url: `/api/v1/recordings/${processing.recordingId}/access`,
        opts: { key: w.apiKey },
        status: 409,
      },
    };
  },
  createRemoteAsset: async (w) => {
    const port = (origin.address() as AddressInfo).port;
    return {
      happy: {
        method: 'POST',
        url: '/api/v1/assets/remote',
        opts: {
          key: w.apiKey,
          body: { kind: 'image', remoteUrl: `http://127.0.0.1:${port}/me.png`, metadata: { crm: 'x' } },
        },
        status: 201,
      },
      error: {
        method: 'POST',
        url: '/api/v1/assets/remote',
        opts: { key: w.apiKey, body: { kind: 'video', remoteUrl: `http://127.0.0.1:${port}/me.png` } },
        status: 422,
      },
    };
  },
  renderLipsync: async (w) => {
    // The workspace's portrait and real speech, by their own signed URLs (read from storage).
    const asset = (await t.services.assets.get(w.tenantId, w.portrait))!;
    const portraitUrl = (await t.services.assets.publicUrl(asset, 600))!;
    const audio = await t.services.assets.createUploaded({
      tenantId: w.tenantId,
      source: Readable.from([(await speechWav('Hi.')).wav]),
    });
    const audioUrl = (await t.services.assets.publicUrl(audio, 600))!;
    return {
      happy: {
        method: 'POST',
        url: '/api/v1/lipsync',
        opts: { key: w.apiKey, body: { audioUrl, portraitUrl } },
        status: 200,
      },
      error: {
        method: 'POST',
        url: '/api/v1/lipsync',
        opts: { key: w.apiKey, body: { audioUrl: 'http://10.0.0.7/a.wav', portraitUrl } },
        status: 422,
      },
    };
  },
  mintLiveSession: async (w) => {
    const avatarId = await readyAvatar(t, w.tenantId);
    return {
      happy: {
        method: 'POST',
        url: '/api/v1/realtime/livekit/session',
        opts: { key: w.apiKey, body: { avatar_id: avatarId, max_duration_seconds: 5 } },
        status: 200,
      },
      error: {
        method: 'POST',
        url: '/api/v1/realtime/livekit/session',
        opts: { key: w.apiKey, body: { avatar_id: 'ava_doesnotexist' } },
        status: 404,
      },
    };
  },
  releaseLiveSession: async (w) => {
    const sessionId = await liveSession(w);
    return {
      happy: {
        method: 'POST',
        url: '/api/v1/realtime/livekit/session/release',
        opts: { key: w.apiKey, body: { session_id: sessionId, reason: 'manual' } },
        status: 200,
      },
      error: {
        method: 'POST',
        url: '/api/v1/realtime/livekit/session/release',
        opts: { key: w.apiKey, body: { session_id: sessionId, reason: 'tab_closed' } },
        status: 422,
      },
    };
  },
  getLiveCapacity: async (w) => ({
    happy: {
      method: 'GET',
      url: '/api/v1/realtime/livekit/capacity?capacity_pool=primary',
      opts: { key: w.apiKey },
      status: 200,
    },
    error: {
      method: 'GET',
      url: '/api/v1/realtime/livekit/capacity?capacity_pool=Not-A-Pool',
      opts: { key: w.apiKey },
      status: 422,
    },
  }),
  getConnectionHistory: async (w) => {
    const sessionId = await liveSession(w);
    return {
      happy: {
        method: 'GET',
        url: `/api/v1/sessions/${sessionId}/connection-history`,
        opts: { key: w.apiKey },
        status: 200,
      },
      error: {
        method: 'GET',
        url: '/api/v1/sessions/ses_doesnotexist/connection-history',
        opts: { key: w.apiKey },
        status: 404,
      },
    };
  },
  prepareRealtime: async (w) => {
    const { avatarId } = await readyTurnAvatar(t, w.tenantId);
    return {
      happy: {
        method: 'POST',
        url: '/api/v1/realtime/prepare',
        opts: { key: w.apiKey, body: { avatar_id: avatarId } },
        status: 200,
      },
      error: {
        method: 'POST',
        url: '/api/v1/realtime/prepare',
        opts: { key: w.apiKey, body: { avatar_id: w.avatarId } },
        status: 409,
      },
    };
  },
  runTurn: async (w) => {
    const { avatarId } = await readyTurnAvatar(t, w.tenantId);
    return {
      happy: {
        method: 'POST',
        url: '/api/v1/realtime/turn',
        opts: {
          key: w.apiKey,
          body: { avatar_id: avatarId, mode: 'repeat', text: 'Hi.', conversation_id: 'c-1' },
          headers: { 'idempotency-key': 'turn-1' },
        },
        status: 200,
      },
      error: {
        method: 'POST',
        url: '/api/v1/realtime/turn',
        opts: { key: w.apiKey, body: { avatar_id: 'ava_doesnotexist', mode: 'repeat', text: 'Hi.' } },
        status: 404,
      },
    };
  },
  planVideoCache: async (w) => {
    const { avatarId } = await readyTurnAvatar(t, w.tenantId);
    return {
      happy: {
        method: 'POST',
        url: '/api/v1/realtime/video-cache/plan',
        opts: { key: w.apiKey, body: { avatar_id: avatarId, video_cache: { fps: 25 } } },
        status: 200,
      },
      error: {
        method: 'POST',
        url: '/api/v1/realtime/video-cache/plan',
        opts: { key: w.apiKey, body: { avatar_id: avatarId, video_cache: { fps: 0 } } },
        status: 422,
      },
    };
  },
};

/** A live call of the workspace, minted on the real LiveKit server. */
async function liveSession(w: Workspace): Promise<string> {
  const res = await t.request('POST', '/api/v1/realtime/livekit/session', {
    key: w.apiKey,
    body: { avatar_id: await readyAvatar(t, w.tenantId), max_duration_seconds: 5 },
  });
  expect(res.status).toBe(200);
  return (await json<{ session_id: string }>(res)).session_id;
}

describe('the OpenAPI document is the contract enforced', () => {
  it('every route documents the statuses its guards, validators and body caps can answer', () => {
    for (const op of operations()) {
      const statuses = new Set(Object.keys(op.responses).map(Number));
      // A keyless route (its credential is in the body: the live-call join) answers no 401.
      const needed = op.security?.length ? [401, 403, 429, 500] : [403, 429, 500];
      if (op.requestBody) needed.push(400, 413, 415, 422);
      if (op.parameters?.some((p) => p.in === 'path')) needed.push(404, 422);
      if (op.parameters?.some((p) => p.in === 'query')) needed.push(422);
      for (const s of needed) expect(statuses.has(s), `${op.operationId} documents ${s}`).toBe(true);
    }
  });

  it('what a route refuses by its schema, the document refuses too (unknown fields, wrong types, a body that is not an object)', async () => {
    const w = await workspace();
    for (const { route } of ROUTES) {
      const schema = route.request?.body?.content?.['application/json']
        ? (checker.find(route.method, route.path)!.op.requestBody!.content['application/json']!.schema as Schema)
        : undefined;
      if (!schema) continue;
      const { happy } = await CALLS[route.operationId as string]!(w);
      const base = happy.opts!.body as Record<string, unknown>;
      expect(checker.errors(schema, base), `${route.operationId}: the happy body is documented`).toBeUndefined();
      const probes: [unknown, string | null][] = [
        [{ ...base, notAField: 1 }, 'notAField'],
        [[base], null],
      ];
      for (const [name, prop] of Object.entries(resolve(schema).properties ?? {})) {
        const types = ([] as string[]).concat(resolve(prop).type ?? []);
        if (types.length === 0) continue;
        probes.push([{ ...base, [name]: types.includes('boolean') ? 'x' : true }, name]);
      }
      for (const [body, field] of probes) {
        const what = `${route.operationId} ${JSON.stringify(body).slice(0, 200)}`;
        expect(checker.errors(schema, body), `${what}: the document must refuse it`).toBeDefined();
        const res = await t.request(happy.method, happy.url, { key: w.apiKey, body });
        expect(res.status, what).toBe(422);
        expect((await json(res)).field, what).toBe(field);
      }
    }
  });

  it('every route answers a real happy-path request and a real error request, each checked against the document', async () => {
    expect(Object.keys(CALLS).sort(), 'a happy and an error request for every route').toEqual(
      ROUTES.map(({ route }) => route.operationId as string).sort(),
    );
    for (const { route } of ROUTES) {
      const id = route.operationId as string;
      const { happy, error } = await CALLS[id]!(await workspace());
      for (const c of [happy, error]) {
        const res = await t.request(c.method, c.url, c.opts);
        expect(res.status, `${id} ${c.method} ${c.url}: ${await res.clone().text()}`).toBe(c.status);
      }
    }
    const checked = checker.checked;
    for (const { route } of ROUTES) {
      const id = route.operationId as string;
      expect(
        checked.some((x) => x.operationId === id && x.status < 300 && x.requestChecked),
        `${id}: a happy exchange was checked`,
      ).toBe(true);
      expect(
        checked.some((x) => x.operationId === id && x.status >= 400),
        `${id}: an error exchange was checked`,
      ).toBe(true);
    }
  });
});
