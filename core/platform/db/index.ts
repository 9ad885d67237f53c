import path from 'node:path';
import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import { connect, type Sql } from './client.ts';
import { startEmbeddedPostgres } from './embedded.ts';
import { migrate } from './migrate.ts';

export type { Sql, Tx } from './client.ts';
export { openConnections } from './client.ts';

export interface Database {
  sql: Sql;
  url: string;
  close(): Promise<void>;
}

/** DATABASE_URL when set, otherwise the embedded PostgreSQL in DATA_DIR; migrated before use. */
export async function openDatabase(config: Config, log: Logger): Promise<Database> {
  let url = config.DATABASE_URL;
  let stopEmbedded = async () => {};
  if (!url) {
    const pg = await startEmbeddedPostgres({ dir: path.join(config.dataDir) });
    log.info({ owned: pg.owned }, 'embedded postgres ready');
    url = pg.url;
    stopEmbedded = pg.stop;
  }
  const sql = connect(url, config.DATABASE_POOL_SIZE);
  const applied = await migrate(sql);
  if (applied.length) log.info({ applied }, 'database migrated');
  return {
    sql,
    url,
    close: async () => {
      await sql.end({ timeout: 5 });
      await stopEmbedded();
    },
  };
}
