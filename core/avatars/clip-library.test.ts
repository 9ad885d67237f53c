import { describe, expect, it } from 'vitest';
import { planDeclaration, validateDeclaration } from '../../clips/declaration/index.ts';
import { currentClipRowFromDb, declarationRejected } from './clip-library.ts';
import type { AvatarClipRow } from './types.ts';

describe('currentClipRowFromDb', () => {
  it('reads DB rows for the plan', () => {
    const db: AvatarClipRow = {
      avatar_id: 'ava_1',
      clip_id: 'nod',
      status: 'ready',
      source_kind: 'generated',
      motion_prompt: 'nod',
      duration_seconds: 4,
      upload_asset_id: null,
      mp4_key: 'k',
      cache_key: null,
      generation_id: 'g',
      anchor_version: 2,
      pose_check: null,
      error: null,
      is_default: true,
      retired_at: null,
      created_at: new Date(),
      updated_at: new Date(),
    };
    const r = currentClipRowFromDb(db);
    expect(r).toMatchObject({
      clipId: 'nod',
      sourceKind: 'generated',
      motionPrompt: 'nod',
      durationSeconds: 4,
      isDefault: true,
      anchorVersion: 2,
    });
    const next = validateDeclaration({
      expectedRevision: 0,
      clips: { nod: { source: { motionPrompt: 'nod', durationSeconds: 4 } } },
    });
    if (!next.ok) throw new Error(JSON.stringify(next.problems));
    expect(planDeclaration([r], next.declaration).kept).toEqual(['nod']);
  });
});

describe('declarationRejected', () => {
  it('maps the first problem to 422 clip_declaration_rejected naming the field', () => {
    const r = validateDeclaration({ expectedRevision: 0, clips: { c: { source: { motionPrompt: '' } } } });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const err = declarationRejected(r.problems);
    expect(err.status).toBe(422);
    expect(err.code).toBe('clip_declaration_rejected');
    expect(err.extra.field).toBe('clips.c.source.motionPrompt');
    expect(err.message).toBe(
      'Invalid clip declaration: "clips.c.source.motionPrompt" must not be empty (after trimming)',
    );
  });

  it('counts the problems beyond the first', () => {
    const err = declarationRejected([
      { field: 'clips.a.source', message: 'is invalid' },
      { field: 'idle.clips[0]', message: 'names clip "x", which is not declared in clips' },
    ]);
    expect(err.extra).toMatchObject({ field: 'clips.a.source', issues: 2 });
  });
});
