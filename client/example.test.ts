import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { getRequestListener } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixtureBytes } from '../api/routes/avatars/test-support.ts';
import { AvatarMuxWriter, encodeJpeg } from '../render/encode/index.ts';
import { speechFromText } from '../render/talking-head/index.ts';
import { closeTts } from '../render/tts/index.ts';
import { speechWav } from '../test/audio.ts';
import { freePort } from '../test/deps.ts';
import { testApi, type TestApi } from '../test/helpers.ts';
import { markdownBlock } from '../docs/readme-support.ts';
import { AvatarClient } from './index.ts';

/**
 * The client library example of docs/lipsync.md ("The client library") runs as written, as a program of
 * its own (the package import pointed at client/index.ts): against the real API for uploads and the
 * lipsync, and, for POST /realtime/turn (its route is built elsewhere), a server answering a real
 * mux stream written by AvatarMuxWriter.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** tsx as this repository has it: the example runs from a folder of its own. */
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

let t: TestApi;
let server: http.Server;
let base = '';
let turns = 0;

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  t = await testApi({ env: { PUBLIC_BASE_URL: base, LIPSYNC_PORTRAIT_LOOP_SECONDS: '2' } });
  const speech = await speechFromText('Hello! Nice to meet you.');
  const jpeg = await encodeJpeg(new Uint8Array(32 * 32 * 4).fill(128), 32, 32);
  const api = getRequestListener(t.app.fetch);
  server = http.createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/api/v1/realtime/turn') return void api(req, res);
    turns++;
    const mux = new AvatarMuxWriter({
      tracks: [
        { kind: 'audio', sampleRate: speech.sampleRate },
        { kind: 'video', codec: 'jpeg', width: 32, height: 32, fps: 25 },
      ],
    });
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.write(mux.start());
    const per = speech.sampleRate / 25;
    for (let at = 0, i = 0; at < speech.samples.length; at += per, i++) {
      res.write(mux.video(jpeg, { frame: i }));
      res.write(mux.audio(speech.samples.subarray(at, Math.min(speech.samples.length, at + per))));
    }
    res.end(mux.end());
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
}, 60_000);

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await closeTts();
  await t.close();
});

describe('the client example of docs/lipsync.md', () => {
  it('is the example of client/README.md, word for word', () => {
    expect(markdownBlock('client/README.md', '## Example', { lang: 'ts' })).toBe(
      markdownBlock('docs/lipsync.md', '### The client library', { lang: 'ts' }),
    );
  });

  it('runs as written: a turn written to a WAV file, then a lipsync of it', { timeout: 120_000 }, async () => {
    const { apiKey } = await t.newTenant({ credits: 60 });
    // An avatar to speak: a portrait registered by a first lipsync.
    const client = new AvatarClient({ apiKey, baseUrl: base });
    const portrait = await client.assets.upload({ file: fixtureBytes('grace_hopper'), filename: 'g.jpg' });
    const { wav } = await speechWav('Hi.');
    const first = await client.lipsync({
      audioUrl: (await client.assets.upload({ file: wav, filename: 'hi.wav' })).publicUrl!,
      portraitUrl: portrait.publicUrl!,
    });

    const dir = mkdtempSync(path.join(os.tmpdir(), 'client-example-'));
    const program = path.join(dir, 'example.mts');
    writeFileSync(
      program,
      markdownBlock('docs/lipsync.md', '### The client library', { lang: 'ts' }).replace(
        "'@avatar-platform/client'",
        JSON.stringify(path.join(ROOT, 'client/index.ts')),
      ),
    );
    const run = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(process.execPath, ['--import', TSX_LOADER, program], {
        cwd: dir,
        env: { ...process.env, API_KEY: apiKey, AVATAR_ID: first.avatarId, BASE_URL: base, NODE_OPTIONS: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      child.on('close', (code) => resolve({ code, out }));
    });
    expect(run.code, run.out).toBe(0);
    expect(turns).toBe(1);
    expect(existsSync(path.join(dir, 'turn.wav'))).toBe(true);
    expect(readFileSync(path.join(dir, 'turn.wav')).subarray(0, 4).toString()).toBe('RIFF');
    expect(run.out).toMatch(/^[\d.]+ s of video at http:\/\/127\.0\.0\.1:\d+\/media\/tenants\/.+\.mp4\?exp=/m);
  });
});
