import { describe, expect, it } from 'vitest';
import { RESERVED_IDS } from './limits.ts';
import { validateDeclaration, type NormalisedDeclaration } from './validate.ts';

type Body = Record<string, unknown>;

/** A valid body: two generated clips, one upload, idle + listening + one action. */
function base(): Body {
  return {
    expectedRevision: 3,
    clips: {
      wave: { source: { motionPrompt: 'wave hello', durationSeconds: 4 } },
      nod: { source: { motionPrompt: 'nod' } },
      intro: { source: { assetId: 'ast_123' } },
    },
    idle: { clips: ['nod'] },
    on: { userSpeechStarted: { clips: ['nod'] } },
    actions: { greet: { description: 'Greet the user', clips: ['wave', 'intro'] } },
  };
}

function ok(body: unknown): NormalisedDeclaration {
  const r = validateDeclaration(body);
  if (!r.ok) throw new Error(`expected ok, got ${JSON.stringify(r.problems)}`);
  return r.declaration;
}

/** The first problem's field (the one the API reports). */
function rejectedField(body: unknown): string {
  const r = validateDeclaration(body);
  if (r.ok) throw new Error('expected the declaration to be refused');
  return r.problems[0]!.field;
}

const withClip = (id: string, source: unknown): Body => ({ expectedRevision: 0, clips: { [id]: { source } } });
const gen = (motionPrompt: unknown, extra: Body = {}) => withClip('c', { motionPrompt, ...extra });
const idleBody = (idle: unknown, ids = ['a', 'b', 'c']): Body => ({
  expectedRevision: 0,
  clips: Object.fromEntries(ids.map((id) => [id, { source: { motionPrompt: `move ${id}` } }])),
  idle,
});

describe('validateDeclaration: baseline', () => {
  it('accepts the base body and normalises it', () => {
    const d = ok(base());
    expect(d.expectedRevision).toBe(3);
    expect(d.clips).toEqual({
      wave: { source: { kind: 'generated', motionPrompt: 'wave hello', durationSeconds: 4 } },
      nod: { source: { kind: 'generated', motionPrompt: 'nod', durationSeconds: 5 } },
      intro: { source: { kind: 'upload', assetId: 'ast_123' } },
    });
    expect(d.behavior).toEqual({
      idle: { clips: ['nod'] },
      on: { userSpeechStarted: { clips: ['nod'] } },
      actions: { greet: { description: 'Greet the user', clips: ['wave', 'intro'] } },
    });
  });

  it('accepts an empty library (full replacement retires everything)', () => {
    expect(ok({ expectedRevision: 0, clips: {} }).clips).toEqual({});
  });

  it('names the offending field in its first problem', () => {
    const r = validateDeclaration(gen(''));
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems[0]).toEqual({
      field: 'clips.c.source.motionPrompt',
      message: 'must not be empty (after trimming)',
    });
  });
});

describe('expectedRevision', () => {
  it.each([[0], [7]])('accepts %s', (v) => expect(ok({ ...base(), expectedRevision: v }).expectedRevision).toBe(v));
  it.each([[-1], [1.5], ['3'], [null]])('refuses %s', (v) =>
    expect(rejectedField({ ...base(), expectedRevision: v })).toBe('expectedRevision'),
  );
  it('is required', () => {
    const { expectedRevision: _, ...rest } = base();
    expect(rejectedField(rest)).toBe('expectedRevision');
  });
});

describe('messages', () => {
  const problem = (body: unknown) => {
    const r = validateDeclaration(body);
    if (r.ok) throw new Error('expected a refusal');
    return r.problems[0]!;
  };
  it('say a field of the wrong type is of the wrong type, and a missing one is missing', () => {
    expect(problem({ ...base(), expectedRevision: 'one' })).toEqual({
      field: 'expectedRevision',
      message: 'must be a number, got a string',
    });
    expect(problem({ ...base(), clips: [] })).toEqual({ field: 'clips', message: 'must be an object, got an array' });
    expect(problem(gen(5))).toEqual({
      field: 'clips.c.source.motionPrompt',
      message: 'must be a string, got a number',
    });
    const { expectedRevision: _, ...missing } = base();
    expect(problem(missing)).toEqual({ field: 'expectedRevision', message: 'is required' });
  });
});

describe('clip and action ids', () => {
  it.each([
    ['a', 1],
    ['x'.repeat(64), 64],
    ['Wave_2-b', 8],
  ])('accepts the id %s (length %i) as a clip id and as an action id', (id) => {
    ok(withClip(id, { assetId: 'a' }));
    ok({ ...withClip('c', { assetId: 'a' }), actions: { [id]: { description: 'd', clips: ['c'] } } });
  });

  it.each([[''], ['x'.repeat(65)], ['has space'], ['dot.ted'], ['slash/x'], ['é'], ['emoji😀']])(
    'refuses the clip id %j',
    (id) => {
      expect(rejectedField(withClip(id, { assetId: 'a' }))).toBe(`clips.${id}`);
    },
  );

  it.each([[''], ['x'.repeat(65)], ['a b'], ['a.b']])('refuses the action id %j', (id) => {
    expect(
      rejectedField({ ...withClip('c', { assetId: 'a' }), actions: { [id]: { description: 'd', clips: ['c'] } } }),
    ).toBe(`actions.${id}`);
  });

  it.each(RESERVED_IDS.map((id) => [id]))('refuses the reserved id %s as a clip id and as an action id', (id) => {
    const clipBody = JSON.parse(`{"expectedRevision":0,"clips":{${JSON.stringify(id)}:{"source":{"assetId":"a"}}}}`);
    expect(rejectedField(clipBody)).toBe(`clips.${id}`);
    const actionBody = JSON.parse(
      `{"expectedRevision":0,"clips":{"c":{"source":{"assetId":"a"}}},"actions":{${JSON.stringify(id)}:{"description":"d","clips":["c"]}}}`,
    );
    expect(rejectedField(actionBody)).toBe(`actions.${id}`);
  });

  it.each([['Source'], ['DEFAULT'], ['None'], ['ALL'], ['Constructor']])(
    'refuses reserved words in any case: %s',
    (id) => {
      expect(rejectedField(withClip(id, { assetId: 'a' }))).toBe(`clips.${id}`);
    },
  );

  it('accepts ids that merely contain a reserved word', () => {
    ok(withClip('source2', { assetId: 'a' }));
    ok(withClip('default_wave', { assetId: 'a' }));
  });

  it('refuses __proto__ anywhere in the raw body (zod would drop it silently)', () => {
    const body = JSON.parse(
      '{"expectedRevision":0,"clips":{"c":{"source":{"assetId":"a"}}},"idle":{"clips":["c"],"weights":{"__proto__":1}}}',
    );
    expect(rejectedField(body)).toBe('idle.weights.__proto__');
  });
});

describe('source', () => {
  it('is exactly { assetId } or { motionPrompt, durationSeconds? }', () => {
    expect(rejectedField(withClip('c', {}))).toBe('clips.c.source');
    expect(rejectedField(withClip('c', { assetId: 'a', motionPrompt: 'nod' }))).toBe('clips.c.source.motionPrompt');
    expect(rejectedField(withClip('c', { assetId: 'a', durationSeconds: 5 }))).toBe('clips.c.source.durationSeconds');
    expect(rejectedField(withClip('c', { durationSeconds: 5 }))).toBe('clips.c.source');
    expect(rejectedField(withClip('c', 'nod'))).toBe('clips.c.source');
    expect(rejectedField({ expectedRevision: 0, clips: { c: {} } })).toBe('clips.c.source');
    expect(rejectedField({ expectedRevision: 0, clips: { c: { source: { assetId: 'a' }, role: 'idle' } } })).toBe(
      'clips.c.role',
    );
  });

  it('names the failing field inside a generated source', () => {
    expect(rejectedField(withClip('wave', { motionPrompt: 'x'.repeat(1201) }))).toBe('clips.wave.source.motionPrompt');
    expect(rejectedField(withClip('wave', { motionPrompt: 'nod', durationSeconds: 9 }))).toBe(
      'clips.wave.source.durationSeconds',
    );
  });
});

describe('motion prompt (trimmed, nonempty, at most 1,200)', () => {
  it('is trimmed', () =>
    expect(ok(gen('  nod twice \n')).clips.c!.source).toMatchObject({ motionPrompt: 'nod twice' }));
  it.each([[''], ['   '], ['\n\t']])('refuses %j (empty after trimming)', (p) =>
    expect(rejectedField(gen(p))).toBe('clips.c.source.motionPrompt'),
  );
  it('accepts exactly 1,200 characters, also with surrounding spaces', () => {
    ok(gen('x'.repeat(1200)));
    ok(gen(`  ${'x'.repeat(1200)}  `));
  });
  it('refuses 1,201 characters', () =>
    expect(rejectedField(gen('x'.repeat(1201)))).toBe('clips.c.source.motionPrompt'));
  it('counts UTF-16 code units (an emoji is 2)', () => {
    ok(gen('😀'.repeat(600)));
    expect(rejectedField(gen(`${'😀'.repeat(600)}x`))).toBe('clips.c.source.motionPrompt');
  });
  it('refuses a non-string', () => expect(rejectedField(gen(5))).toBe('clips.c.source.motionPrompt'));
});

describe('asset id (trimmed, nonempty, at most 160)', () => {
  it('is trimmed', () =>
    expect(ok(withClip('c', { assetId: ' ast_1 ' })).clips.c!.source).toEqual({ kind: 'upload', assetId: 'ast_1' }));
  it('accepts 160', () => ok(withClip('c', { assetId: 'a'.repeat(160) })));
  it('refuses 161', () =>
    expect(rejectedField(withClip('c', { assetId: 'a'.repeat(161) }))).toBe('clips.c.source.assetId'));
  it('refuses empty after trimming', () =>
    expect(rejectedField(withClip('c', { assetId: '  ' }))).toBe('clips.c.source.assetId'));
});

describe('duration (integer 4 to 8, default 5)', () => {
  it.each([[4], [5], [8]])('accepts %s', (s) =>
    expect(ok(gen('nod', { durationSeconds: s })).clips.c!.source).toMatchObject({ durationSeconds: s }),
  );
  it.each([[3], [9], [4.5], [0], [-5], ['5'], [null], [1e308]])('refuses %s', (s) =>
    expect(rejectedField(gen('nod', { durationSeconds: s }))).toBe('clips.c.source.durationSeconds'),
  );
  it('defaults to 5', () =>
    expect(ok(gen('nod')).clips.c!.source).toEqual({ kind: 'generated', motionPrompt: 'nod', durationSeconds: 5 }));
});

describe('action description (trimmed, nonempty, at most 512)', () => {
  const act = (description: unknown): Body => ({
    ...withClip('c', { assetId: 'a' }),
    actions: { greet: { description, clips: ['c'] } },
  });
  it('is trimmed', () => expect(ok(act('  Greet warmly  ')).behavior.actions!.greet!.description).toBe('Greet warmly'));
  it('accepts exactly 512, also with surrounding spaces', () => {
    ok(act('d'.repeat(512)));
    ok(act(` ${'d'.repeat(512)} `));
  });
  it('refuses 513', () => expect(rejectedField(act('d'.repeat(513)))).toBe('actions.greet.description'));
  it.each([[''], ['  ']])('refuses %j', (d) => expect(rejectedField(act(d))).toBe('actions.greet.description'));
  it('is required', () =>
    expect(rejectedField({ ...withClip('c', { assetId: 'a' }), actions: { greet: { clips: ['c'] } } })).toBe(
      'actions.greet.description',
    ));
});

describe('clip lists (nonempty, no repeats, at most 32)', () => {
  const ids = Array.from({ length: 33 }, (_, i) => `c${i}`);
  const many: Body = {
    expectedRevision: 0,
    clips: Object.fromEntries(ids.map((id) => [id, { source: { assetId: id } }])),
  };
  const lists = {
    idle: (clips: string[]) => ({ ...many, idle: { clips } }),
    listening: (clips: string[]) => ({ ...many, on: { userSpeechStarted: { clips } } }),
    action: (clips: string[]) => ({ ...many, actions: { greet: { description: 'd', clips } } }),
  };
  const fieldOf = { idle: 'idle.clips', listening: 'on.userSpeechStarted.clips', action: 'actions.greet.clips' };

  for (const [name, make] of Object.entries(lists) as [keyof typeof lists, (c: string[]) => Body][]) {
    it(`${name}: refuses an empty list`, () => expect(rejectedField(make([]))).toBe(fieldOf[name]));
    it(`${name}: refuses a repeat, naming the repeated position`, () =>
      expect(rejectedField(make(['c0', 'c1', 'c0']))).toBe(`${fieldOf[name]}[2]`));
    it(`${name}: refuses 33 items`, () => expect(rejectedField(make(ids))).toBe(fieldOf[name]));
    it(`${name}: accepts 32 items`, () => ok(make(ids.slice(0, 32))));
    it(`${name}: refuses an undeclared clip, naming its position`, () =>
      expect(rejectedField(make(['c0', 'nope']))).toBe(`${fieldOf[name]}[1]`));
    it(`${name}: refuses a non-string entry`, () =>
      expect(rejectedField(make(['c0', 5 as unknown as string]))).toBe(`${fieldOf[name]}[1]`));
  }

  it('one clip may appear in idle, listening and action lists', () => {
    ok({
      ...many,
      idle: { clips: ['c0'] },
      on: { userSpeechStarted: { clips: ['c0'] } },
      actions: { a: { description: 'd', clips: ['c0'] } },
    });
  });

  it('names the undeclared clip of the right action', () => {
    expect(
      rejectedField({
        ...many,
        actions: { ok1: { description: 'd', clips: ['c1'] }, greet: { description: 'd', clips: ['zz'] } },
      }),
    ).toBe('actions.greet.clips[0]');
  });
});

describe('idle pool and weights', () => {
  it('accepts ten idle variations', () => {
    const ids = Array.from({ length: 10 }, (_, i) => `idle${i}`);
    expect(ok(idleBody({ clips: ids }, ids)).behavior.idle!.clips).toHaveLength(10);
  });
  it.each([[0], [1], [37.5], [100]])(
    'accepts weight %s',
    (w) => void ok(idleBody({ clips: ['a', 'b'], weights: { a: w } })),
  );
  it.each([[-1], [101], [1e308], [Number.MAX_VALUE], ['1'], [null]])('refuses weight %s', (w) =>
    expect(rejectedField(idleBody({ clips: ['a'], weights: { a: w } }))).toBe('idle.weights.a'),
  );
  it('refuses non-finite weights (not representable in JSON, refused if a caller passes them)', () => {
    expect(rejectedField(idleBody({ clips: ['a'], weights: { a: Infinity } }))).toBe('idle.weights.a');
    expect(rejectedField(idleBody({ clips: ['a'], weights: { a: NaN } }))).toBe('idle.weights.a');
  });
  it('refuses every member at zero', () =>
    expect(rejectedField(idleBody({ clips: ['a', 'b'], weights: { source: 0, a: 0, b: 0 } }))).toBe('idle.weights'));
  it('accepts the source at zero with an idle clip positive (explicitly or by default)', () => {
    ok(idleBody({ clips: ['a'], weights: { source: 0, a: 2 } }));
    ok(idleBody({ clips: ['a', 'b'], weights: { source: 0, a: 0 } }));
  });
  it('the source counts as the positive member unless weighted 0', () =>
    ok(idleBody({ clips: ['a', 'b'], weights: { a: 0, b: 0 } })));
  it('refuses weights combined with the legacy weight', () =>
    expect(rejectedField(idleBody({ clips: ['a'], weight: 2, weights: { a: 1 } }))).toBe('idle.weights'));
  it.each([[0], [3], [100]])('accepts the legacy weight %s alone', (w) =>
    expect(ok(idleBody({ clips: ['a'], weight: w })).behavior.idle).toEqual({ clips: ['a'], weight: w }),
  );
  it.each([[-1], [101]])('refuses the legacy weight %s', (w) =>
    expect(rejectedField(idleBody({ clips: ['a'], weight: w }))).toBe('idle.weight'),
  );
  it('refuses a weights key outside the pool: declared but not idle, undeclared, mis-cased source', () => {
    expect(rejectedField(idleBody({ clips: ['a'], weights: { b: 1 } }))).toBe('idle.weights.b');
    expect(rejectedField(idleBody({ clips: ['a'], weights: { zz: 1 } }))).toBe('idle.weights.zz');
    expect(rejectedField(idleBody({ clips: ['a'], weights: { Source: 1 } }))).toBe('idle.weights.Source');
  });
  it('keeps the weights as declared', () =>
    expect(ok(idleBody({ clips: ['a', 'b'], weights: { source: 0, a: 3 } })).behavior.idle).toEqual({
      clips: ['a', 'b'],
      weights: { source: 0, a: 3 },
    }));
  it('idle needs clips', () => expect(rejectedField(idleBody({ weights: { source: 1 } }))).toBe('idle.clips'));
});

describe('strictness: unknown and mis-cased fields', () => {
  it.each([
    [{ ...base(), extra: 1 }, 'extra'],
    [{ ...base(), ExpectedRevision: 1 }, 'ExpectedRevision'],
    [{ ...base(), behavior: {} }, 'behavior'],
    [{ ...base(), idle: { clips: ['nod'], Weights: {} } }, 'idle.Weights'],
    [{ ...base(), on: { userSpeechstarted: { clips: ['nod'] } } }, 'on.userSpeechstarted'],
    [{ ...base(), on: { userSpeechStarted: { clips: ['nod'], weight: 1 } } }, 'on.userSpeechStarted.weight'],
    [{ ...base(), actions: { greet: { description: 'd', clips: ['nod'], whenHint: 'x' } } }, 'actions.greet.whenHint'],
    [withClip('c', { assetID: 'a' }), 'clips.c.source.assetID'],
    [withClip('c', { motionPrompt: 'nod', duration: 5 }), 'clips.c.source.duration'],
  ])('refuses %j naming %s', (body, field) => expect(rejectedField(body)).toBe(field));

  it.each([[null], [[]], ['x'], [42]])('refuses a non-object body %j', (body) =>
    expect(validateDeclaration(body).ok).toBe(false),
  );
  it('refuses null sections', () => {
    expect(rejectedField({ ...base(), idle: null })).toBe('idle');
    expect(rejectedField({ ...base(), clips: null })).toBe('clips');
  });
});
