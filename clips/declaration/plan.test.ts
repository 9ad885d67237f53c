import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RESERVED_IDS } from './limits.ts';
import { planDeclaration, type CurrentClipRow } from './plan.ts';
import { envelopeToDeclaration, rowToSource, type ClipEnvelope, type ClipEnvelopeRow } from './round-trip.ts';
import { validateDeclaration, type NormalisedDeclaration } from './validate.ts';

function decl(body: unknown): NormalisedDeclaration {
  const r = validateDeclaration(body);
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.declaration;
}

function row(clipId: string, over: Partial<CurrentClipRow> = {}): CurrentClipRow {
  return {
    clipId,
    status: 'ready',
    sourceKind: 'generated',
    motionPrompt: 'nod',
    durationSeconds: 5,
    uploadAssetId: null,
    mp4Key: `k/${clipId}.mp4`,
    generationId: 'gen_1',
    anchorVersion: 1,
    poseCheck: null,
    error: null,
    isDefault: false,
    retiredAt: null,
    ...over,
  };
}
const upload = (clipId: string, assetId: string, over: Partial<CurrentClipRow> = {}) =>
  row(clipId, { sourceKind: 'upload', motionPrompt: null, durationSeconds: null, uploadAssetId: assetId, ...over });

/** The rows a fully rendered library of `d` would have. */
function rowsOf(d: NormalisedDeclaration): CurrentClipRow[] {
  return Object.entries(d.clips).map(([id, { source }]) =>
    source.kind === 'upload'
      ? upload(id, source.assetId)
      : row(id, { motionPrompt: source.motionPrompt, durationSeconds: source.durationSeconds }),
  );
}

describe('planDeclaration', () => {
  const current = [
    row('nod', { motionPrompt: 'nod', durationSeconds: 4 }),
    row('wave', { motionPrompt: 'wave hello', durationSeconds: 6 }),
    upload('intro', 'ast_1'),
  ];
  const body = {
    expectedRevision: 1,
    clips: {
      nod: { source: { motionPrompt: 'nod', durationSeconds: 4 } },
      wave: { source: { motionPrompt: 'wave hello', durationSeconds: 6 } },
      intro: { source: { assetId: 'ast_1' } },
    },
  };

  it('keeps unchanged sources even when selection and action metadata change', () => {
    const plan = planDeclaration(
      current,
      decl({
        ...body,
        idle: { clips: ['nod', 'wave'], weights: { source: 0 } },
        actions: { hi: { description: 'Say hi', clips: ['wave'] } },
      }),
    );
    expect(plan).toEqual({ kept: ['nod', 'wave', 'intro'], queued: [], retired: [] });
    const plan2 = planDeclaration(
      current,
      decl({
        ...body,
        on: { userSpeechStarted: { clips: ['intro'] } },
        actions: { hi: { description: 'Say hi differently', clips: ['nod'] } },
      }),
    );
    expect(plan2).toEqual({ kept: ['nod', 'wave', 'intro'], queued: [], retired: [] });
  });

  it('compares trimmed prompts: whitespace around a prompt is no change', () => {
    expect(
      planDeclaration(
        current,
        decl({ ...body, clips: { ...body.clips, nod: { source: { motionPrompt: '  nod \n', durationSeconds: 4 } } } }),
      ).kept,
    ).toContain('nod');
    expect(
      planDeclaration(
        [row('nod', { motionPrompt: ' nod ', durationSeconds: 4 })],
        decl({ expectedRevision: 0, clips: { nod: body.clips.nod } }),
      ).kept,
    ).toEqual(['nod']);
  });

  it('queues a prompt change', () => {
    expect(
      planDeclaration(
        current,
        decl({
          ...body,
          clips: { ...body.clips, wave: { source: { motionPrompt: 'wave goodbye', durationSeconds: 6 } } },
        }),
      ),
    ).toEqual({
      kept: ['nod', 'intro'],
      queued: ['wave'],
      retired: [],
    });
  });

  it('queues a duration change, including to the default', () => {
    expect(
      planDeclaration(
        current,
        decl({ ...body, clips: { ...body.clips, nod: { source: { motionPrompt: 'nod', durationSeconds: 5 } } } }),
      ).queued,
    ).toEqual(['nod']);
    expect(
      planDeclaration(current, decl({ ...body, clips: { ...body.clips, nod: { source: { motionPrompt: 'nod' } } } }))
        .queued,
    ).toEqual(['nod']);
  });

  it('queues an asset change and a source kind change', () => {
    expect(
      planDeclaration(current, decl({ ...body, clips: { ...body.clips, intro: { source: { assetId: 'ast_2' } } } }))
        .queued,
    ).toEqual(['intro']);
    expect(
      planDeclaration(
        current,
        decl({ ...body, clips: { ...body.clips, intro: { source: { motionPrompt: 'ast_1' } } } }),
      ).queued,
    ).toEqual(['intro']);
    expect(
      planDeclaration(current, decl({ ...body, clips: { ...body.clips, nod: { source: { assetId: 'nod' } } } })).queued,
    ).toEqual(['nod']);
  });

  it('retires an omitted clip (full replacement) and queues a new one', () => {
    const { intro: _, ...rest } = body.clips;
    expect(
      planDeclaration(current, decl({ ...body, clips: { ...rest, smile: { source: { motionPrompt: 'smile' } } } })),
    ).toEqual({
      kept: ['nod', 'wave'],
      queued: ['smile'],
      retired: ['intro'],
    });
    expect(planDeclaration(current, decl({ expectedRevision: 1, clips: {} }))).toEqual({
      kept: [],
      queued: [],
      retired: ['nod', 'wave', 'intro'],
    });
  });

  it('ignores already retired rows: re-declaring one queues it, omitting it retires nothing', () => {
    const old = [row('nod', { retiredAt: new Date() })];
    expect(
      planDeclaration(old, decl({ expectedRevision: 0, clips: { nod: { source: { motionPrompt: 'nod' } } } })),
    ).toEqual({ kept: [], queued: ['nod'], retired: [] });
    expect(planDeclaration(old, decl({ expectedRevision: 0, clips: {} }))).toEqual({
      kept: [],
      queued: [],
      retired: [],
    });
  });

  it('a null stored duration matches the default 5; a null stored prompt matches nothing', () => {
    expect(
      planDeclaration(
        [row('a', { durationSeconds: null })],
        decl({ expectedRevision: 0, clips: { a: { source: { motionPrompt: 'nod' } } } }),
      ).kept,
    ).toEqual(['a']);
    expect(
      planDeclaration(
        [row('a', { motionPrompt: null })],
        decl({ expectedRevision: 0, clips: { a: { source: { motionPrompt: 'nod' } } } }),
      ).queued,
    ).toEqual(['a']);
  });

  it('keeps an unchanged source whatever its job status (a failed render is retried elsewhere, not by re-declaring)', () => {
    for (const status of ['queued', 'rendering', 'ready', 'failed'] as const) {
      expect(
        planDeclaration(
          [row('a', { status })],
          decl({ expectedRevision: 0, clips: { a: { source: { motionPrompt: 'nod' } } } }),
        ).kept,
      ).toEqual(['a']);
    }
  });
});

describe('rowToSource', () => {
  it('maps an uploaded row to { assetId }', () =>
    expect(rowToSource(upload('i', 'ast_9'))).toEqual({ ok: true, clipId: 'i', source: { assetId: 'ast_9' } }));
  it('maps a generated row to { motionPrompt, durationSeconds }', () =>
    expect(rowToSource(row('w', { motionPrompt: 'wave', durationSeconds: 7 }))).toEqual({
      ok: true,
      clipId: 'w',
      source: { motionPrompt: 'wave', durationSeconds: 7 },
    }));
  it('omits a null duration', () =>
    expect(rowToSource(row('w', { motionPrompt: 'wave', durationSeconds: null }))).toEqual({
      ok: true,
      clipId: 'w',
      source: { motionPrompt: 'wave' },
    }));
  it.each([[null], [''], ['   ']])('reports an older generated row with prompt %j as needs_prompt', (p) =>
    expect(rowToSource(row('old', { motionPrompt: p }))).toEqual({ ok: false, clipId: 'old', reason: 'needs_prompt' }),
  );
  it('reports an uploaded row without asset id as needs_asset', () =>
    expect(rowToSource(upload('u', ''))).toMatchObject({ ok: false, reason: 'needs_asset' }));
});

function envRow(r: CurrentClipRow): ClipEnvelopeRow {
  return {
    clipId: r.clipId,
    status: r.status,
    url: r.mp4Key ? `https://cdn/${r.mp4Key}` : null,
    source: r.sourceKind,
    uploadAssetId: r.uploadAssetId,
    motionPrompt: r.motionPrompt,
    durationSeconds: r.durationSeconds,
    anchorVersion: r.anchorVersion,
    poseCheck: r.poseCheck,
    error: r.error,
    createdAt: '2026-01-01T00:00:00Z',
    updatedAt: '2026-01-01T00:00:00Z',
  };
}
function envelope(rows: CurrentClipRow[], behavior: ClipEnvelope['behavior']): ClipEnvelope {
  return {
    data: rows.map(envRow),
    avatarId: 'ava_1',
    revision: 9,
    anchorVersion: 1,
    anchor: null,
    clipLibraryEligible: true,
    defaultSourceAssetId: 'ast_p',
    behavior,
  };
}

describe('round trip GET -> PUT -> plan', () => {
  const rows = [
    row('listen', { motionPrompt: 'listen attentively, nod slightly', durationSeconds: 5, isDefault: true }),
    row('nod', { motionPrompt: 'nod', durationSeconds: 4, isDefault: true }),
    row('legacy', { motionPrompt: 'think', durationSeconds: null }),
    upload('intro', 'ast_1', { status: 'failed', error: 'pose refused' }),
  ];
  const behavior = {
    idle: { clips: ['nod', 'legacy'], weights: { source: 0, nod: 2 } },
    on: { userSpeechStarted: { clips: ['listen'] } },
    actions: { greet: { description: 'Greet the user', clips: ['intro', 'nod'] } },
  };

  it('re-declares the envelope, behavior at the top level, and every clip is kept', () => {
    const { body, needsPrompt, needsAsset } = envelopeToDeclaration(envelope(rows, behavior));
    expect(needsPrompt).toEqual([]);
    expect(needsAsset).toEqual([]);
    expect(body).toEqual({
      expectedRevision: 9,
      clips: {
        listen: { source: { motionPrompt: 'listen attentively, nod slightly', durationSeconds: 5 } },
        nod: { source: { motionPrompt: 'nod', durationSeconds: 4 } },
        legacy: { source: { motionPrompt: 'think' } },
        intro: { source: { assetId: 'ast_1' } },
      },
      ...behavior,
    });
    const wire = JSON.parse(JSON.stringify(body)) as unknown;
    const d = decl(wire);
    expect(d.behavior).toEqual(behavior);
    expect(planDeclaration(rows, d)).toEqual({ kept: ['listen', 'nod', 'legacy', 'intro'], queued: [], retired: [] });
  });

  it('does not share behavior objects with the envelope', () => {
    const env = envelope(rows, behavior);
    envelopeToDeclaration(env).body.idle!.clips.push('x');
    expect(env.behavior!.idle!.clips).toEqual(['nod', 'legacy']);
  });

  it('handles an envelope without behavior', () => {
    const { body } = envelopeToDeclaration(envelope(rows, null));
    expect(Object.keys(body)).toEqual(['expectedRevision', 'clips']);
    expect(planDeclaration(rows, decl(body)).queued).toEqual([]);
  });

  it('reports rows that need a prompt, and takes one when given (then the clip is queued)', () => {
    const withOld = [...rows, row('old', { motionPrompt: null, durationSeconds: 6 })];
    const first = envelopeToDeclaration(envelope(withOld, behavior));
    expect(first.needsPrompt).toEqual(['old']);
    expect(first.body.clips.old).toBeUndefined();
    const second = envelopeToDeclaration(envelope(withOld, behavior), { prompts: { old: 'smile' } });
    expect(second.needsPrompt).toEqual([]);
    expect(second.body.clips.old).toEqual({ source: { motionPrompt: 'smile', durationSeconds: 6 } });
    expect(planDeclaration(withOld, decl(second.body))).toEqual({
      kept: ['listen', 'nod', 'legacy', 'intro'],
      queued: ['old'],
      retired: [],
    });
  });
});

// ---- property: a library that already holds exactly what is declared plans nothing ----

const RESERVED = new Set(RESERVED_IDS);
const idArb = fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/).filter((id) => !RESERVED.has(id.toLowerCase()));
const textArb = (max: number) =>
  fc
    .string({ minLength: 1, maxLength: max, unit: 'grapheme-ascii' })
    .filter((s) => s.trim().length > 0 && s.length <= max);
const sourceArb = fc.oneof(
  textArb(160).map((assetId) => ({ assetId })),
  fc.record(
    { motionPrompt: textArb(1200), durationSeconds: fc.integer({ min: 4, max: 8 }) },
    { requiredKeys: ['motionPrompt'] },
  ),
);
const listArb = (ids: string[]) => fc.shuffledSubarray(ids, { minLength: 1, maxLength: Math.min(32, ids.length) });

const declarationArb = fc.uniqueArray(idArb, { minLength: 0, maxLength: 12 }).chain((ids) =>
  fc.record(
    {
      expectedRevision: fc.nat(),
      clips: fc
        .tuple(...ids.map(() => sourceArb))
        .map((sources) => Object.fromEntries(ids.map((id, i) => [id, { source: sources[i] }]))),
      idle:
        ids.length === 0
          ? fc.constant(undefined)
          : listArb(ids).chain((clips) =>
              fc.oneof(
                fc.constant({ clips }),
                fc.integer({ min: 0, max: 100 }).map((weight) => ({ clips, weight })),
                fc
                  .record({ source: fc.integer({ min: 1, max: 100 }) })
                  .map((weights) => ({ clips, weights: { ...weights, [clips[0]!]: 0 } })),
              ),
            ),
      on: ids.length === 0 ? fc.constant(undefined) : listArb(ids).map((clips) => ({ userSpeechStarted: { clips } })),
      actions:
        ids.length === 0
          ? fc.constant(undefined)
          : fc.dictionary(idArb, fc.record({ description: textArb(512), clips: listArb(ids) }), { maxKeys: 4 }),
    },
    { requiredKeys: ['expectedRevision', 'clips'] },
  ),
);

describe('property', () => {
  it('for random valid declarations, planDeclaration(rowsOf(decl), decl) keeps everything and queues nothing', () => {
    fc.assert(
      fc.property(declarationArb, (body) => {
        const wire = JSON.parse(JSON.stringify(body)) as unknown;
        const d = decl(wire);
        const plan = planDeclaration(rowsOf(d), d);
        expect(plan.queued).toEqual([]);
        expect(plan.retired).toEqual([]);
        expect(plan.kept).toEqual(Object.keys(d.clips));
        // And the GET -> PUT round trip of that library re-declares the same sources.
        const back = envelopeToDeclaration(envelope(rowsOf(d), d.behavior));
        expect(decl(JSON.parse(JSON.stringify(back.body)))).toEqual({ ...d, expectedRevision: 9 });
      }),
      { numRuns: 200 },
    );
  });
});
