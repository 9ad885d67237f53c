import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { Sql } from './client.ts';

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
/** Any constant: serialises migrators of several processes starting at once. */
const MIGRATION_LOCK = 7_240_311;

export function listMigrations(): Migration[] {
  return readdirSync(MIGRATIONS_DIR)
    .filter((f) => /^\d{4}_.+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: f.replace(/\.sql$/, ''), sql: readFileSync(path.join(MIGRATIONS_DIR, f), 'utf8') }));
}

export interface Migration {
  version: string;
  sql: string;
}

/**
 * Applies the migrations not applied yet (by default the versioned SQL files of migrations/), all
 * in ONE transaction: a failing migration rolls back the whole batch, so the schema is never left
 * between two versions that no release of the code matches, and the transaction's advisory lock
 * makes a second migrator wait, then find them applied. Hence a migration must be transactional
 * DDL/DML (no CREATE INDEX CONCURRENTLY, no VACUUM). Returns the versions applied.
 */
export async function migrate(sql: Sql, migrations: readonly Migration[] = listMigrations()): Promise<string[]> {
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`create table if not exists schema_migrations (version text primary key, applied_at timestamptz not null default now())`;
    const done = new Set(
      (await tx<{ version: string }[]>`select version from schema_migrations`).map((r) => r.version),
    );
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      await tx.unsafe(m.sql);
      await tx`insert into schema_migrations (version) values (${m.version})`;
      applied.push(m.version);
    }
  });
  return applied;
}
