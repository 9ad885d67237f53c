/** The shipped model files are the ones the manifest and model card describe, and load as described. */
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DETECTOR_FILE, LANDMARK_FILE, MODEL_DIR, rigSessions } from './models.ts';

interface ManifestEntry {
  file: string;
  sha256: string;
  bytes: number;
  inputs: Record<string, number[]>;
  outputs: Record<string, number[]>;
}
const manifest = JSON.parse(readFileSync(MODEL_DIR + 'manifest.json', 'utf8')) as {
  source: { package: string; version: string; license: string };
  models: Record<string, ManifestEntry>;
};
const entries = Object.values(manifest.models);

describe('face models', () => {
  it('are the files the manifest and model card name, byte for byte', () => {
    const card = readFileSync(MODEL_DIR + 'MODEL_CARD.md', 'utf8');
    expect(entries.map((e) => e.file).sort()).toEqual([DETECTOR_FILE, LANDMARK_FILE].sort());
    for (const e of entries) {
      const bytes = readFileSync(MODEL_DIR + e.file);
      expect(bytes.length).toBe(e.bytes);
      expect(bytes.length).toBeLessThan(5 * 1024 * 1024);
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(e.sha256);
      expect(card).toContain(e.sha256);
    }
  });

  it('ship with their licence and provenance', () => {
    expect(manifest.source).toMatchObject({ package: 'mediapipe', license: 'Apache-2.0' });
    expect(readFileSync(MODEL_DIR + 'LICENSE', 'utf8')).toContain('Apache License');
  });

  it('load with the tensor names and shapes the manifest records', { timeout: 60_000 }, async () => {
    const { detector, landmarks } = await rigSessions();
    const byFile = Object.fromEntries(entries.map((e) => [e.file, e]));
    for (const [session, file] of [
      [detector, DETECTOR_FILE],
      [landmarks, LANDMARK_FILE],
    ] as const) {
      const e = byFile[file]!;
      expect([...session.inputNames]).toEqual(Object.keys(e.inputs));
      expect([...session.outputNames].sort()).toEqual(Object.keys(e.outputs).sort());
    }
    expect(byFile[DETECTOR_FILE]!.inputs.image).toEqual([1, 128, 128, 3]);
    expect(byFile[LANDMARK_FILE]!.inputs.image).toEqual([1, 192, 192, 3]);
    expect(byFile[LANDMARK_FILE]!.outputs.landmarks).toEqual([1, 1, 1, 468 * 3]);
  });
});

describe('rig fixtures', () => {
  it('are small and each has its source and licence recorded', () => {
    const dir = fileURLToPath(new URL('./fixtures/', import.meta.url));
    const sources = readFileSync(dir + 'SOURCES.md', 'utf8');
    const images = readdirSync(dir).filter((f) => f.endsWith('.jpg'));
    expect(images.length).toBeGreaterThanOrEqual(4);
    for (const f of images) {
      expect(sources).toContain(f);
      expect(readFileSync(dir + f).length).toBeLessThan(150 * 1024);
    }
  });
});
