import { afterAll, describe, expect, it } from 'vitest';
import { freshDatabase } from '../../../test/helpers.ts';
import { listMigrations, migrate } from './migrate.ts';

const db = await freshDatabase();
afterAll(() => db.drop());

const tableExists = async (name: string) => {
  const [r] = await db.sql<{ t: string | null }[]>`select to_regclass(${name})::text as t`;
  return r?.t != null;
};
const applied = async () =>
  (await db.sql<{ version: string }[]>`select version from schema_migrations order by version`).map((r) => r.version);

describe('migrate', () => {
  it('applies pending migrations as one batch: a failing one rolls back the ones before it', async () => {
    const shipped = listMigrations();
    expect(await applied()).toEqual(shipped.map((m) => m.version));
    const good = { version: '9998_probe_table', sql: 'create table migrate_probe (id int primary key)' };
    const bad = { version: '9999_broken', sql: 'alter table no_such_table add column x int' };

    await expect(migrate(db.sql, [...shipped, good, bad])).rejects.toThrow(/no_such_table/);
    expect(await tableExists('migrate_probe')).toBe(false);
    expect(await applied()).toEqual(shipped.map((m) => m.version));

    expect(await migrate(db.sql, [...shipped, good])).toEqual(['9998_probe_table']);
    expect(await tableExists('migrate_probe')).toBe(true);
    expect(await migrate(db.sql, [...shipped, good])).toEqual([]);
  });

  it('serialises concurrent migrators: one applies a migration, the other finds it applied', async () => {
    // The sleep keeps the first migrator inside its transaction while the second one starts.
    const slow = {
      version: '9997_concurrent_probe',
      sql: 'select pg_sleep(0.3); create table migrate_concurrent_probe (id int primary key)',
    };
    const next = [...listMigrations(), slow];
    const results = await Promise.all([migrate(db.sql, next), migrate(db.sql, next)]);
    expect(results.map((r) => r.join(',')).sort()).toEqual(['', '9997_concurrent_probe']);
  });
});
