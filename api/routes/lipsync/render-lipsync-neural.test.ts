import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeTts } from '../../../render/tts/index.ts';
import { speechWav } from '../../../test/audio.ts';
import { json, testApi } from '../../../test/helpers.ts';
import { uploadAsset } from './test-support.ts';
import { fixtureBytes } from '../avatars/test-support.ts';

/**
 * POST /lipsync with LIPSYNC_MODEL set to a community Wav2Lip export as it is: a stand-in of
 * instant-high's wav2lip_256.onnx (mel_spectrogram + video_frames, 256 px, batch fixed at 1, opset
 * 15; render/lipsync/fixtures), which the slot refused before (it took 96 px dynamic-batch models
 * only), so every request answered 502 render_failed. The render runs in its child process as in
 * production.
 */
const MODEL = fileURLToPath(new URL('../../../render/lipsync/fixtures/wav2lip_hq_256.onnx', import.meta.url));
const t = await testApi({
  env: { LIPSYNC_MODEL: MODEL, LIPSYNC_MAX_AUDIO_SECONDS: '4', LIPSYNC_PORTRAIT_LOOP_SECONDS: '2' },
});

let speech: { wav: Buffer; seconds: number };

beforeAll(async () => {
  speech = await speechWav('Hello from a neural model.');
}, 60_000);
afterAll(async () => {
  await closeTts();
  await t.close();
});

const upload = (key: string, bytes: Buffer, filename: string) => uploadAsset(t, key, bytes, filename);

describe('POST /lipsync through a neural model', () => {
  it(
    'happy: renders over a portrait with a fixed-batch 256 px Wav2Lip export, one frame per run',
    { timeout: 180_000 },
    async () => {
      const tenant = await t.newTenant({ credits: 60 });
      const portraitUrl = await upload(tenant.apiKey, fixtureBytes('grace_hopper'), 'grace.jpg');
      const audioUrl = await upload(tenant.apiKey, speech.wav, 'hello.wav');
      const res = await t.request('POST', '/api/v1/lipsync', { key: tenant.apiKey, body: { audioUrl, portraitUrl } });
      const body = await json<{ frames: number; fps: number }>(res);
      expect(res.status, JSON.stringify(body)).toBe(200);
      expect(Math.abs(body.frames - Math.ceil(speech.seconds * body.fps))).toBeLessThanOrEqual(1);
    },
  );
});
