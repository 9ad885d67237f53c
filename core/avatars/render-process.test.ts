import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ChildJobs, ChildJobTimeout, finalRenderFailure, RenderProcesses, RenderRefused } from './render-process.ts';

const fixture = (name: string) => fileURLToPath(new URL(`../../render/rig/fixtures/${name}`, import.meta.url));
const work = await mkdtemp(path.join(os.tmpdir(), 'render-process-test-'));
afterAll(() => rm(work, { recursive: true, force: true }));

const clipRequest = (portrait: string, outDir: string) => ({
  portraitPath: fixture(portrait),
  outDir: path.join(work, outDir),
  seed: 'test',
  motionPrompt: null,
  seconds: 0,
  clip: { motionPrompt: 'nod', durationSeconds: 4, fps: 10 },
  reviewed: false,
});

describe('RenderProcesses', () => {
  it('renders a clip in a child process: its MP4 and frame cache on disk', { timeout: 60_000 }, async () => {
    const out = await new RenderProcesses().render(clipRequest('grace_hopper.jpg', 'ok'));
    expect(out).toMatchObject({
      ok: true,
      frames: 40,
      mp4: path.join(work, 'ok', 'clip.mp4'),
      cacheDir: path.join(work, 'ok', 'cache'),
    });
    expect((await stat(out.mp4)).size).toBeGreaterThan(0);
    expect((await stat(path.join(out.cacheDir, 'manifest.json'))).isFile()).toBe(true);
  });

  it(
    "rejects a portrait the rig refuses with RenderRefused carrying the rig's reason",
    { timeout: 60_000 },
    async () => {
      const err = await new RenderProcesses().render(clipRequest('rocket.jpg', 'refused')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RenderRefused);
      expect((err as Error).message).toMatch(/^The portrait cannot be animated \(no_face\): /);
    },
  );

  it('killAll kills the running renders: each fails as a crash (retried), not as a refusal', async () => {
    const renders = new RenderProcesses();
    const running = renders.render(clipRequest('grace_hopper.jpg', 'killed'));
    renders.killAll();
    const err = await running.catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(RenderRefused);
    expect((err as Error).message).toMatch(/^clip render exited with SIGKILL/);
  });
});

describe('ChildJobs', () => {
  const program = fileURLToPath(new URL('../../render/cli/render-job.ts', import.meta.url));

  it('kills a child past its time limit and rejects with ChildJobTimeout', { timeout: 60_000 }, async () => {
    const jobs = new ChildJobs();
    const err = await jobs
      .run(program, clipRequest('grace_hopper.jpg', 'timeout'), { what: 'clip render', timeoutMs: 10 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChildJobTimeout);
    expect((err as Error).message).toBe('clip render ran past its limit of 10 ms');
    expect(jobs.size).toBe(0);
  });

  it('kills a child when its signal aborts and rejects with the reason', { timeout: 60_000 }, async () => {
    const jobs = new ChildJobs();
    const controller = new AbortController();
    const running = jobs.run(program, clipRequest('grace_hopper.jpg', 'aborted'), {
      what: 'clip render',
      signal: controller.signal,
    });
    expect(jobs.size).toBe(1);
    controller.abort(new Error('client went away'));
    await expect(running).rejects.toThrow('client went away');
    expect(jobs.size).toBe(0);
  });
});

describe('finalRenderFailure', () => {
  const job = (retryCount: number) => ({ retryCount, retryLimit: 2 });

  it('ends the job at once on a refusal, with the refusal as the error', () => {
    expect(finalRenderFailure(new RenderRefused('The avatar has no portrait to animate'), job(0), 'Loop')).toBe(
      'The avatar has no portrait to animate',
    );
  });

  it('retries any other error until the last attempt, which ends the job', () => {
    expect(finalRenderFailure(new Error('crash'), job(0), 'Clip')).toBeUndefined();
    expect(finalRenderFailure(new Error('crash'), job(1), 'Clip')).toBeUndefined();
    expect(finalRenderFailure(new Error('crash'), job(2), 'Clip')).toBe('Clip generation failed after 3 attempts');
  });
});
