import postgres from 'postgres';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { expectApiError, freshDatabase } from '../../test/helpers.ts';
import type { Sql } from '../platform/db/index.ts';
import { TenantStore } from '../tenants.ts';
import { KeyStore } from './key-store.ts';
import * as keys from './keys.ts';

// The real module, with secretMatches observable: verification must compare a secret whether or not the key exists.
vi.mock('./keys.ts', async (importOriginal) => {
  const real = await importOriginal<typeof keys>();
  return { ...real, secretMatches: vi.fn(real.secretMatches) };
});

const db = await freshDatabase();
afterAll(() => db.drop());

/**
 * One connection to the database that counts the queries it sends (a fragment inside a query is not
 * one), from after its own set-up (postgres.js reads the array types once per connection).
 */
async function countingSql(): Promise<{ sql: Sql; queries: () => number }> {
  let n = 0;
  const sql = postgres(db.url, {
    max: 1,
    onnotice: () => {},
    debug: () => void n++,
    types: { bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) } },
  }) as unknown as Sql;
  opened.push(sql);
  await sql`select 1`;
  n = 0;
  return { sql, queries: () => n };
}
const opened: Sql[] = [];
afterAll(() => Promise.all(opened.map((sql) => sql.end({ timeout: 2 }))));

const tenants = new TenantStore(db.sql);

async function mint(store: KeyStore) {
  const tenant = await tenants.create('verify');
  return (await store.create({ tenantId: tenant.id, name: 'k', scopes: ['*'] })).apiKey;
}

/** A well-formed key whose id matches nothing. */
const madeUp = (c = 'Z') => `svc_${c.repeat(16)}_${'s'.repeat(43)}`;

afterEach(() => {
  vi.useRealTimers();
  vi.mocked(keys.secretMatches).mockClear();
});

describe('KeyStore.verify: made-up keys', () => {
  it('answers an unknown id from a short negative cache: one query the first time, none on a repeat', async () => {
    const counting = await countingSql();
    const store = new KeyStore(counting.sql);
    for (const kind of [madeUp('Y'), `svc_live_${'q'.repeat(40)}`]) {
      const before = counting.queries();
      await expectApiError(store.verify(`Bearer ${kind}`), 'unauthorized', 401);
      expect(counting.queries() - before, kind).toBe(1);
      for (let i = 0; i < 20; i++) await expectApiError(store.verify(`Bearer ${kind}`), 'unauthorized', 401);
      expect(counting.queries() - before, kind).toBe(1);
    }
  });

  it('forgets an unknown id after 10 s, and at once on an auth change', async () => {
    const counting = await countingSql();
    const store = new KeyStore(counting.sql);
    vi.useFakeTimers({ toFake: ['Date'] });
    await expectApiError(store.verify(`Bearer ${madeUp('X')}`), 'unauthorized', 401);
    vi.setSystemTime(Date.now() + 9_000);
    await expectApiError(store.verify(`Bearer ${madeUp('X')}`), 'unauthorized', 401);
    expect(counting.queries()).toBe(1);
    vi.setSystemTime(Date.now() + 2_000);
    await expectApiError(store.verify(`Bearer ${madeUp('X')}`), 'unauthorized', 401);
    expect(counting.queries()).toBe(2);
    // A revocation (like the NOTIFY of any key or tenant change) drops the negative entries too.
    await store.revoke('svc_nothing');
    const revoked = counting.queries();
    await expectApiError(store.verify(`Bearer ${madeUp('X')}`), 'unauthorized', 401);
    expect(counting.queries() - revoked).toBe(1);
  });

  it('does the same work for a known id and an unknown one: one query, then the cache; one secret comparison against a 32-byte hash', async () => {
    const counting = await countingSql();
    const store = new KeyStore(counting.sql);
    const real = await mint(store);
    const wrongSecret = real.replace(/.$/, (ch) => (ch === 'a' ? 'b' : 'a'));
    const compare = vi.mocked(keys.secretMatches);
    const work = async (bearer: string) => {
      const queries = counting.queries();
      compare.mockClear();
      await store.verify(`Bearer ${bearer}`).catch(() => undefined);
      return { queries: counting.queries() - queries, comparisons: compare.mock.calls.map(([, hash]) => hash.length) };
    };
    // First sight: one lookup each, found or not.
    expect(await work(wrongSecret)).toEqual({ queries: 1, comparisons: [32] });
    expect(await work(madeUp('W'))).toEqual({ queries: 1, comparisons: [32] });
    // Then both from memory, compared the same way.
    expect(await work(wrongSecret)).toEqual({ queries: 0, comparisons: [32] });
    expect(await work(madeUp('W'))).toEqual({ queries: 0, comparisons: [32] });
    expect(await work(real)).toEqual({ queries: 0, comparisons: [32] });
  });

  it('a flood of made-up ids does not evict the verified keys', async () => {
    const counting = await countingSql();
    const store = new KeyStore(counting.sql);
    const real = await mint(store);
    await store.verify(`Bearer ${real}`);
    const chars = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    for (let i = 0; i < 300; i++) {
      const id = `${chars[i % 62]}${chars[Math.floor(i / 62)]}`.padEnd(16, 'u');
      await store.verify(`Bearer svc_${id}_${'s'.repeat(43)}`).catch(() => undefined);
    }
    const before = counting.queries();
    await store.verify(`Bearer ${real}`);
    expect(counting.queries()).toBe(before);
  });
});
