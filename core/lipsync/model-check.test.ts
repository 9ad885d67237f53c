/**
 * LIPSYNC_MODEL is checked as the API and the agent worker start: a model that fits no Wav2Lip-class
 * contract stops the process at once (status 2, before its database starts), naming what does not
 * fit; one that fits is logged with how it runs.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { startEntryPoint } from '../../test/processes.ts';
import { checkLipSyncModel } from './model-check.ts';

const fixture = (name: string) => fileURLToPath(new URL(`../../render/lipsync/fixtures/${name}.onnx`, import.meta.url));
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('the lip-sync model at start-up', () => {
  it('is logged with how it runs when it fits; builtin needs no check', async () => {
    const lines: Record<string, unknown>[] = [];
    const log = pino(
      { level: 'info' },
      new Writable({
        write: (chunk: Buffer, _enc, done) => (
          lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>),
          done()
        ),
      }),
    );
    await checkLipSyncModel('builtin', log);
    expect(lines).toEqual([]);
    await checkLipSyncModel(fixture('wav2lip_hq_256'), log);
    expect(lines).toMatchObject([
      {
        msg: 'lip-sync model fits',
        melInput: 'mel_spectrogram',
        faceInput: 'video_frames',
        faceOutput: 'predicted_frames',
        faceSize: 256,
        fixedBatch: true,
      },
    ]);
  });

  for (const entry of ['api/main.ts', 'agent/main.ts']) {
    it(`stops ${entry} at once when it fits no contract, naming what does not fit`, { timeout: 120_000 }, async () => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), 'avatar-lipsync-model-'));
      dirs.push(dataDir);
      const proc = startEntryPoint(entry, {
        DATA_DIR: dataDir,
        DATABASE_URL: '',
        REDIS_URL: '',
        LOG_LEVEL: 'info',
        LIPSYNC_MODEL: fixture('misfit_rgb_face'),
        // The worker needs a LiveKit server to start at all; it is never reached.
        LIVEKIT_URL: 'ws://127.0.0.1:9',
        LIVEKIT_API_KEY: 'devkey',
        LIVEKIT_API_SECRET: 'secret',
      });
      const { code } = await proc.exited;
      expect(code, proc.output()).toBe(2);
      const stderr = proc.lines.filter((l) => l.stream === 'stderr').map((l) => l.text);
      expect(stderr.join('\n')).toMatch(
        /^LIPSYNC_MODEL: .*misfit_rgb_face\.onnx is not a Wav2Lip-class lip-sync model: input `x` has 3 channels; a Wav2Lip-class model has a 1-channel mel \[N,1,80,16\] and a 6-channel face \[N,6,H,H\]$/m,
      );
      expect(existsSync(path.join(dataDir, 'postgres')), 'its database was started').toBe(false);
    });
  }
});
