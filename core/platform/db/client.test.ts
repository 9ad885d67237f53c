import { afterAll, describe, expect, it } from 'vitest';
import { freshDatabase } from '../../../test/helpers.ts';
import { connect, openConnections } from './client.ts';

const db = await freshDatabase();
afterAll(() => db.drop());

/** Connections to the test's database other than the asking one. */
const others = async () => {
  const [r] = await db.sql<{ n: number }[]>`
    select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`;
  return r!.n;
};

describe('the database client', () => {
  it('opens the connections of its pool before they are needed, so no query later pays their handshake', async () => {
    // The helper's own pool holds one open connection (the one asking); a new pool of 4 opens none until used.
    await db.sql`select 1`;
    const before = await others();
    const sql = connect(db.url, 4);
    try {
      expect(await others()).toBe(before);
      await openConnections(sql, 4);
      expect(await others()).toBe(before + 4);
    } finally {
      await sql.end({ timeout: 2 });
    }
  });
});
